/**
 * The x402 payment requirement of spec 2.7: the JSON body of a 402 answer, read by the client as
 * `PaymentRequired`. Parsed strictly (exactly the six fields, `scheme` = `exact`, the amount a
 * positive integer in base units, addresses in canonical base58) into a typed value whose amount
 * is a bigint; `requirementBody` writes it back in the wire shape.
 */
import { X402FormatError } from "./errors.js";
import { address } from "../wire/consent.js";
import { exactKeys, type Fail, object, text, unitsText, url } from "../wire/strict-json.js";

export const X402_SCHEME = "exact";

export interface PaymentRequirement {
  readonly scheme: typeof X402_SCHEME;
  /** Settlement network, `<ledger>-mainnet` on the main network (spec 2.4, 2.7). */
  readonly network: string;
  /** Base58 address of the settlement token (mint). */
  readonly token: string;
  readonly amountUnits: bigint;
  /** Base58 address of the receiving wallet. */
  readonly payTo: string;
  /** The paid resource, an absolute http(s) URL. */
  readonly resource: string;
}

/** The wire shape of spec 2.7. */
export interface PaymentRequirementBody {
  scheme: string;
  network: string;
  token: string;
  amount: string;
  payTo: string;
  resource: string;
}

const FIELDS = ["scheme", "network", "token", "amount", "payTo", "resource"] as const;

const fail: Fail = (field, detail) => {
  throw new X402FormatError("malformed_requirement", field, detail);
};

/** A network name: lower-case letters, digits and dashes (`solana-mainnet`, `solana-localnet`). */
export function network(value: unknown, field: string, onFail: Fail): string {
  const raw = text(value, field, onFail);
  if (!/^[a-z0-9][a-z0-9-]{0,63}$/.test(raw)) onFail(field, "expected a network name such as solana-mainnet");
  return raw;
}

export function parsePaymentRequirement(json: unknown): PaymentRequirement {
  const body = object(json, "body", fail);
  exactKeys(body, FIELDS, [], "", fail);
  if (body.scheme !== X402_SCHEME) fail("scheme", `expected "${X402_SCHEME}"`);
  return {
    scheme: X402_SCHEME,
    network: network(body.network, "network", fail),
    token: address(body.token, "token", fail),
    amountUnits: unitsText(body.amount, "amount", fail),
    payTo: address(body.payTo, "payTo", fail),
    resource: url(body.resource, "resource", fail).toString(),
  };
}

export function requirementBody(requirement: PaymentRequirement): PaymentRequirementBody {
  return {
    scheme: requirement.scheme,
    network: requirement.network,
    token: requirement.token,
    amount: requirement.amountUnits.toString(),
    payTo: requirement.payTo,
    resource: requirement.resource,
  };
}
