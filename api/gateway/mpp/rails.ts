/**
 * Payment methods and rail choice (spec 1 routing rules, 2.9). The spec leaves the identifier
 * strings open (<stablecoin_method>, <card_method>); ours are `stablecoin` and `card`. Lightning
 * and custom rails may be offered by a service; we recognise none of them as payable.
 */
import type { Rail } from "../../../programs/payment_ledger/ts/index.js";
import { MppPaymentError } from "./errors.js";

export const STABLECOIN_METHOD = "stablecoin";
export const CARD_METHOD = "card";

export type PayableMethod = typeof STABLECOIN_METHOD | typeof CARD_METHOD;
export type MppRail = Extract<Rail, "stablecoin" | "card">;

export function railOf(method: string): MppRail | null {
  if (method === STABLECOIN_METHOD) return "stablecoin";
  if (method === CARD_METHOD) return "card";
  return null;
}

/** Stablecoin whenever offered; card only when no stablecoin rail is; anything else is refused. */
export function chooseMethod(offered: readonly string[]): PayableMethod {
  if (offered.includes(STABLECOIN_METHOD)) return STABLECOIN_METHOD;
  if (offered.includes(CARD_METHOD)) return CARD_METHOD;
  throw new MppPaymentError("method_unsupported", `none of ${JSON.stringify(offered)} is a rail we pay with`);
}
