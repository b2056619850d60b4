/**
 * Spec 4.7 step 6: the gateway's reservation closed after the paid request, completed with the
 * payment's transaction or released when the request failed. Completing never throws (the caller
 * paid and holds the answer; throwing would invite paying again); releasing answers the error
 * `pay` throws, saying whether money moved.
 */
import type { Authorization } from "../authorization.js";
import { InsufficientFundsError, PaymentError, ServiceError } from "../errors.js";
import { usdcToUnits } from "../money.js";
import type { PayCall } from "./call.js";

const paymentPath = (call: PayCall, reservationId: string, action: "complete" | "release"): string =>
  `/v1/agents/${encodeURIComponent(call.agentId)}/payments/${encodeURIComponent(reservationId)}/${action}`;

/**
 * The payment landed. The gateway's facilitator usually closed the reservation itself already
 * (200 or 409 CONFLICT "settled" both mean done); the gateway closes linked reservations on
 * settlement and releases unused ones when they expire. Answers the transaction's explorer link
 * when the gateway gives one, and learns the gateway's link template from it.
 */
export async function completeReservation(call: PayCall, reservationId: string, txHash: string): Promise<string | undefined> {
  try {
    const answer = await call.shared.transport.request<{ solanaExplorer?: unknown }>("POST", paymentPath(call, reservationId, "complete"), {
      body: { txHash },
    });
    const link = answer?.solanaExplorer;
    if (typeof link !== "string" || !link.includes(txHash)) return undefined;
    const at = link.indexOf(txHash);
    call.shared.explorerTemplate ??= { prefix: link.slice(0, at), suffix: link.slice(at + txHash.length) };
    return link;
  } catch {
    // Already closed (409 CONFLICT: the gateway closed it itself) or unreachable: the payment
    // happened either way, and the caller holds the answer it paid for. Never thrown.
    return undefined;
  }
}

/**
 * A real x402 / MPP payment: hands the settlement transaction to the gateway, which records the
 * payment. The record's transaction and its explorer link, or undefined when it is not recorded
 * yet (never thrown: the payment happened, the gateway's sweeper records it anyway).
 */
export async function recordTransfer(
  call: PayCall,
  reservationId: string,
  settlementTxHash: string,
): Promise<{ txHash: string; solanaExplorer?: string } | undefined> {
  try {
    const answer = await call.shared.transport.request<{ txHash?: unknown; solanaExplorer?: unknown }>(
      "POST",
      paymentPath(call, reservationId, "complete"),
      { body: { txHash: settlementTxHash } },
    );
    if (typeof answer?.txHash !== "string") return undefined;
    const link = answer.solanaExplorer;
    return { txHash: answer.txHash, ...(typeof link === "string" && link.includes(answer.txHash) ? { solanaExplorer: link } : {}) };
  } catch {
    return undefined;
  }
}

/**
 * The paid request failed definitively: release the reservation and build the PaymentError. If
 * the gateway answers that the reservation was settled meanwhile, the money moved although the
 * answer was lost; the error says so (do not pay again without checking transactions.list). A
 * reservation that could not be released leaves the outcome unknown (`PAYMENT_OUTCOME_UNKNOWN`).
 */
export async function releaseReservation(
  call: PayCall,
  authorization: Authorization,
  message: string,
  cause?: unknown,
): Promise<PaymentError | InsufficientFundsError> {
  try {
    await call.shared.transport.request("POST", paymentPath(call, authorization.reservationId, "release"), { body: {} });
  } catch (error) {
    if (error instanceof ServiceError && error.code === "CONFLICT" && /being settled/.test(error.message)) {
      // The payee already handed the payment to the facilitator: it may still land (and counts
      // against the policy meanwhile). Not paid again here; transactions.list shows the outcome.
      return new PaymentError(`${message}; reservation ${authorization.reservationId} is being settled: the payment may still land`, {
        cause: cause ?? error,
        code: "PAYMENT_OUTCOME_UNKNOWN",
      });
    }
    if (error instanceof ServiceError && error.code === "CONFLICT" && /settled/.test(error.message)) {
      return new PaymentError(
        `${message}; the gateway reports reservation ${authorization.reservationId} as settled: the payment was made, the answer was lost`,
        { cause: cause ?? error, code: "PAYMENT_SETTLED_ANSWER_LOST" },
      );
    }
    // Not released (the gateway unreachable or failing): whoever holds the signed payment may still
    // present it, so the outcome is not known; saying "failed" would invite paying twice.
    return new PaymentError(`${message}; reservation ${authorization.reservationId} could not be released: the payment may still land`, {
      cause: cause ?? error,
      code: "PAYMENT_OUTCOME_UNKNOWN",
    });
  }
  // The gateway does not hold funds back at authorization; a settlement the ledger refused for
  // want of funds shows here as a wallet balance below the price (spec 7 InsufficientFundsError).
  const balance = await call.wallet.balance().catch(() => undefined);
  if (balance !== undefined && usdcToUnits(balance.usdc) < usdcToUnits(authorization.amount.usdc)) {
    return new InsufficientFundsError(
      `insufficient funds: agent ${call.agentId} needs ${authorization.amount.usdc} usdc for ${call.endpoint}, balance is ${balance.usdc} usdc`,
      balance,
      { code: "INSUFFICIENT_FUNDS", ...(cause === undefined ? {} : { cause }) },
    );
  }
  return new PaymentError(message, cause === undefined ? {} : { cause });
}
