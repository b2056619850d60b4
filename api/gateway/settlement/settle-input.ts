/**
 * A settle request checked and decoded before anything is read or written: protocol, rail and
 * amount validated, the endpoint normalised and hashed, addresses and the settlement reference
 * decoded. A bad request fails here with a `PaymentError`, having touched neither chain nor database.
 */
import type { PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { endpointHash, endpointText, PROTOCOLS, RAILS, SIGNATURE_BYTES } from "../../../programs/payment_ledger/ts/index.js";
import { endpointHost } from "../../shared/policy/domains.js";
import { PaymentError } from "../chain/errors.js";
import { checkAmountUnits, parseAddress } from "../chain/ledger.js";
import type { SettleRequest } from "./settler.js";

/** The protocol layer's settle request (api/gateway/settlement/settler.ts), whose reference may also be base58 text. */
export interface SettlePaymentInput extends Omit<SettleRequest, "settlementReference"> {
  /**
   * 64 bytes naming a separate settlement (base58 text or bytes): a third-party x402
   * facilitator's transaction signature, or a card processor's reference (api/gateway/card).
   */
  readonly settlementReference?: string | Uint8Array;
}

export interface ParsedInput {
  readonly payee: PublicKey;
  readonly endpoint: string;
  readonly domain: string;
  readonly endpointHash: Uint8Array;
  readonly settlementReference: Uint8Array | null;
  readonly invocation: PublicKey | null;
  readonly atomic: boolean;
}

/** A base58 transaction signature as its 64 bytes; `what` names it in the error. */
export function parseSignature(text: string, what: string): Uint8Array {
  let bytes: Uint8Array;
  try {
    bytes = bs58.decode(text);
  } catch {
    throw new PaymentError(`${what} is not base58`);
  }
  if (bytes.length !== SIGNATURE_BYTES) throw new PaymentError(`${what} must be a ${SIGNATURE_BYTES}-byte signature`);
  return bytes;
}

function checkedReference(bytes: Uint8Array): Uint8Array {
  if (bytes.length !== SIGNATURE_BYTES) throw new PaymentError(`settlement reference must be ${SIGNATURE_BYTES} bytes`);
  return bytes;
}

export function parseInput(input: SettlePaymentInput): ParsedInput {
  checkAmountUnits(input.amountUnits);
  if (!PROTOCOLS.includes(input.protocol)) throw new PaymentError(`unknown protocol ${JSON.stringify(input.protocol)}`);
  if (!RAILS.includes(input.rail)) throw new PaymentError(`unknown rail ${JSON.stringify(input.rail)}`);
  const endpoint = endpointText(input.endpoint.trim());
  const reference = input.settlementReference;
  const settlementReference =
    reference === undefined
      ? null
      : typeof reference === "string"
        ? parseSignature(reference, "settlement reference")
        : checkedReference(reference);
  return {
    payee: parseAddress(input.payee, "payee"),
    endpoint,
    domain: endpointHost(endpoint),
    endpointHash: endpointHash(endpoint),
    settlementReference,
    invocation: input.invocation === undefined ? null : parseAddress(input.invocation, "invocation"),
    atomic: input.rail === "stablecoin" && settlementReference === null,
  };
}
