/**
 * The card rail's processor boundary (MPP card rail, spec 1 "card rail as fallback"). A real
 * integration (an acquirer or a PSP such as Stripe) implements this interface; the gateway only
 * ever authorizes, captures or voids. Amounts are settlement-token base units (6 decimals) of the
 * request's currency; a real processor converts to its minor units at its own edge.
 */

export interface AuthorizeRequest {
  /**
   * The agent's internal key (api/shared/agent-ids.ts), unique across accounts where a public id is not:
   * the customer whose card (or account on file) is charged. Never put in a caller's answer.
   */
  readonly customer: string;
  readonly amountUnits: bigint;
  /** ISO 4217-style code as the MPP request gave it (e.g. `USDC` treated as USD by the processor). */
  readonly currency: string;
  /** Same key → same authorization, never a second hold (retries after a timeout). */
  readonly idempotencyKey: string;
  readonly description?: string;
}

export interface CardAuthorization {
  /** The processor's reference; at most 64 UTF-8 bytes (it is recorded on the ledger, see reference.ts). */
  readonly reference: string;
  readonly amountUnits: bigint;
  readonly currency: string;
  readonly status: "authorized" | "captured" | "voided";
}

export interface CardProcessor {
  /** Names the processor in logs and docs; the stand-in's name says it is one. */
  readonly name: string;
  /** Places a hold; throws `CardDeclinedError` when the processor refuses. */
  authorize(request: AuthorizeRequest): Promise<CardAuthorization>;
  /** Captures a held authorization in full. */
  capture(reference: string): Promise<CardAuthorization>;
  /** Releases a hold that will not be captured (the ledger record failed). */
  void(reference: string): Promise<CardAuthorization>;
}

export type CardDeclineCode = "insufficient_funds" | "limit_exceeded" | "card_declined";

export class CardDeclinedError extends Error {
  constructor(
    readonly code: CardDeclineCode,
    detail: string,
  ) {
    super(`card declined (${code}): ${detail}`);
    this.name = "CardDeclinedError";
  }
}

export class CardStateError extends Error {
  constructor(
    readonly reference: string,
    detail: string,
  ) {
    super(`card authorization ${reference}: ${detail}`);
    this.name = "CardStateError";
  }
}
