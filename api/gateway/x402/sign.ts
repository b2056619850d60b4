/**
 * The agent's side of spec 4.3 step 3: build the PaymentPayload that pays exactly a requirement
 * and sign its canonical bytes with the agent's wallet key. The spend policy runs before this
 * (spec 4.7); nothing here checks it.
 */
import { NONCE_PATTERN, newNonce } from "../wire/consent.js";
import { canonicalPayloadBytes, type PaymentPayload } from "./payload.js";
import type { PaymentRequirement } from "./requirement.js";
import type { AgentSigner } from "../chain/signer.js";

/** How long a signed payload stays settleable unless the caller says otherwise. */
export const DEFAULT_VALIDITY_SECONDS = 60;

export interface SignOptions {
  /** Unique per payment; 32 random bytes in hex when absent. */
  readonly nonce?: string;
  /** Unix seconds; `now + DEFAULT_VALIDITY_SECONDS` when absent. */
  readonly validUntilSeconds?: number;
  readonly now?: Date;
}

export async function signPaymentPayload(
  signer: AgentSigner,
  requirement: PaymentRequirement,
  options: SignOptions = {},
): Promise<PaymentPayload> {
  const nonce = options.nonce ?? newNonce();
  if (!NONCE_PATTERN.test(nonce)) throw new RangeError("nonce must be 16 to 128 characters of A-Z a-z 0-9 _ -");
  const nowSeconds = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const authorization = {
    from: signer.address,
    to: requirement.payTo,
    amountUnits: requirement.amountUnits,
    token: requirement.token,
    nonce,
    validUntilSeconds: options.validUntilSeconds ?? nowSeconds + DEFAULT_VALIDITY_SECONDS,
  };
  const signature = await signer.sign(canonicalPayloadBytes(requirement.scheme, requirement.network, authorization));
  return { scheme: requirement.scheme, network: requirement.network, payload: authorization, signature };
}
