/**
 * STAND-IN card processor. We cannot reach a card network from here (no acquirer account, no
 * network access in tests), so this class plays one behind the same `CardProcessor` interface a
 * real integration implements. It holds authorizations in memory, never moves money, and says so
 * in its name and in every reference it issues (`standin_auth_…`). It keeps the real contract
 * that matters to callers: idempotent authorize, declines as `CardDeclinedError`, capture and void
 * only from `authorized`. Replace it with a real processor; nothing else changes.
 */
import { randomBytes } from "node:crypto";
import { type AuthorizeRequest, type CardAuthorization, CardDeclinedError, type CardProcessor, CardStateError } from "./processor.js";

export interface StandInOptions {
  /** Authorizations above this amount are declined with `limit_exceeded` (tests of the decline path). */
  readonly declineAboveUnits?: bigint;
  /** Customers whose every authorization is declined with `card_declined`. */
  readonly declinedCustomers?: readonly string[];
  /** Bound on the in-memory book; authorize refuses beyond it rather than grow without limit. */
  readonly maxAuthorizations?: number;
}

interface Entry {
  authorization: CardAuthorization;
  readonly idempotencyKey: string;
  readonly customer: string;
}

export class StandInCardProcessor implements CardProcessor {
  readonly name = "stand-in card processor (no card network)";
  private readonly byReference = new Map<string, Entry>();
  private readonly byKey = new Map<string, Entry>();

  constructor(private readonly options: StandInOptions = {}) {}

  async authorize(request: AuthorizeRequest): Promise<CardAuthorization> {
    const existing = this.byKey.get(request.idempotencyKey);
    if (existing !== undefined) {
      const same = existing.customer === request.customer && existing.authorization.amountUnits === request.amountUnits;
      if (!same) throw new CardStateError(existing.authorization.reference, "idempotency key reused with different terms");
      return existing.authorization;
    }
    if (request.amountUnits <= 0n) throw new RangeError("authorization amount must be positive");
    if (this.options.declinedCustomers?.includes(request.customer) === true) {
      // The customer is the agent's internal key: the decline, which reaches the seller, does not name it.
      throw new CardDeclinedError("card_declined", "the customer's card was declined");
    }
    const limit = this.options.declineAboveUnits;
    if (limit !== undefined && request.amountUnits > limit) {
      throw new CardDeclinedError("limit_exceeded", `${request.amountUnits} above ${limit} base units`);
    }
    if (this.byReference.size >= (this.options.maxAuthorizations ?? 100_000)) throw new Error("stand-in card book is full");
    const entry: Entry = {
      authorization: {
        reference: `standin_auth_${randomBytes(12).toString("hex")}`,
        amountUnits: request.amountUnits,
        currency: request.currency,
        status: "authorized",
      },
      idempotencyKey: request.idempotencyKey,
      customer: request.customer,
    };
    this.byReference.set(entry.authorization.reference, entry);
    this.byKey.set(request.idempotencyKey, entry);
    return entry.authorization;
  }

  async capture(reference: string): Promise<CardAuthorization> {
    return this.transition(reference, "captured");
  }

  async void(reference: string): Promise<CardAuthorization> {
    return this.transition(reference, "voided");
  }

  /** What the stand-in holds for a reference (tests and demos inspect it). */
  lookup(reference: string): CardAuthorization | undefined {
    return this.byReference.get(reference)?.authorization;
  }

  private transition(reference: string, to: "captured" | "voided"): CardAuthorization {
    const entry = this.byReference.get(reference);
    if (entry === undefined) throw new CardStateError(reference, "unknown authorization");
    if (entry.authorization.status === to) return entry.authorization;
    if (entry.authorization.status !== "authorized")
      throw new CardStateError(reference, `cannot ${to === "captured" ? "capture" : "void"} a ${entry.authorization.status} authorization`);
    entry.authorization = { ...entry.authorization, status: to };
    return entry.authorization;
  }
}
