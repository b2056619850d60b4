/**
 * Run by test/ops/typescript-loader.test.ts under the services' TypeScript loader
 * (scripts/typescript/register.mjs); prints, as one JSON line, what the loader made of this file.
 */
import idl from "../../../programs/payment_ledger/idl/payment_ledger.json" with { type: "json" };
import { JsonNumber } from "../../../api/shared/json-number.js";
import type { JsonValue } from "../../../api/shared/http/json.js";

/** Erased by the compiler: the lines below move up in the emitted code unless mapped back. */
interface Shape {
  readonly a: JsonValue;
  readonly b: number;
}

function outer(): () => number {
  const named = (): number => 1;
  return named;
}

class Fields {
  readonly declared: number | undefined;
  readonly value = 1;
}

const shape: Shape = { a: null, b: 2 };
const error = new Error("here");
console.log(
  JSON.stringify({
    outer: String(outer),
    name: outer().name,
    idl: idl.address,
    number: new JsonNumber("1.50").text,
    fields: Object.keys(new Fields()),
    shape: shape.b,
    frame: error.stack!.split("\n")[1]!.trim(),
  }),
);
