/**
 * The services' TypeScript loader (scripts/typescript/register.mjs, what package.json and the
 * systemd units run): a real `node` process loads a fixture through it. Sources importing each
 * other by `.js` specifiers, JSON with its attribute, type-only imports erased, ES2022 class
 * fields, stack traces mapped to the .ts lines, and no name-keeping wrapper around closures (the
 * reason it replaces tsx in the services: docs/performance.md, "HTTP path").
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { TYPESCRIPT_LOADER } from "../../scripts/typescript/loader.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const FIXTURE = "test/ops/support/typescript-fixture.ts";

describe("the services' TypeScript loader", () => {
  it("runs a TypeScript module as written, without wrapping its closures", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [...TYPESCRIPT_LOADER, FIXTURE], {
      cwd: ROOT,
    });
    const printed = JSON.parse(stdout.trim()) as Record<string, unknown>;
    const idl = JSON.parse(readFileSync(resolve(ROOT, "programs/payment_ledger/idl/payment_ledger.json"), "utf8")) as { address: string };
    expect(printed.idl).toBe(idl.address);
    expect(printed.number).toBe("1.50");
    expect(printed.shape).toBe(2);
    // ES2022 class fields: a declared field without initializer exists too (useDefineForClassFields).
    expect(printed.fields).toEqual(["declared", "value"]);
    expect(printed.name).toBe("named");
    expect(printed.outer).toContain("const named = () => 1;");
    expect(printed.outer).not.toContain("__name");
    // The stack frame of `new Error` names the fixture's own line, not the emitted code's.
    const line =
      readFileSync(resolve(ROOT, FIXTURE), "utf8")
        .split("\n")
        .findIndex((text) => text.includes('new Error("here")')) + 1;
    expect(printed.frame).toMatch(new RegExp(`typescript-fixture\\.ts:${line}:\\d+\\)?$`));
  });
});
