/**
 * MPP in the spec's format (spec 2.9, 4.4): the gateway's submission confirmed at the service's
 * payment endpoint, which answers a session token; the reservation is completed, then the request
 * goes again with the token. The session is kept for the origin (`MppSessions`) and pays later
 * requests without a 402 or a gateway round trip (`mppSession`, spec 4.4 step 5).
 */
import { type ApiAnswer, callApi, headersObject } from "../api-call.js";
import { isTransferAuthorization, type MppAuthorization } from "../authorization.js";
import { errorFromProblem, PaymentError } from "../errors.js";
import { decimalToUnits, unitsToUsdc, usdcToUnits } from "../money.js";
import { type MppReceipt, readMppReceipt, X_MPP_ERROR, X_MPP_SESSION } from "../receipts.js";
import type { MppSession } from "../sessions.js";
import type { PayCall } from "./call.js";
import { explorerLink } from "./explorer.js";
import { completeReservation, releaseReservation } from "./reservation.js";
import { type PaymentResult, unpaid } from "./result.js";
import type { ProtocolPayment } from "./strategy.js";

export const mppPayment: ProtocolPayment<MppAuthorization> = {
  takes: (authorization, offer): authorization is MppAuthorization =>
    !isTransferAuthorization(authorization) && authorization.protocol === "mpp" && offer.mpp !== undefined,

  async pay(call, authorization, offer) {
    const request = offer.mpp!;
    let confirmation: ApiAnswer;
    try {
      confirmation = await callApi(
        {
          url: authorization.paymentEndpoint,
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json" },
          body: JSON.stringify(authorization.submission),
        },
        {
          fetch: call.shared.fetch,
          timeoutMs: call.shared.transport.timeout,
          retry: call.shared.transport.retryOptions,
          retryServerErrors: true,
          signal: call.signal,
        },
      );
    } catch (error) {
      throw await releaseReservation(call, authorization, `the MPP payment endpoint ${authorization.paymentEndpoint} got no answer`, error);
    }
    const confirmed = isRecord(confirmation.data) ? confirmation.data : {};
    const txHash = typeof confirmed.txHash === "string" ? confirmed.txHash : undefined;
    const token = confirmation.headers.get(X_MPP_SESSION);
    if (confirmation.status < 200 || confirmation.status > 299 || txHash === undefined) {
      const refusal = confirmation.headers.get(X_MPP_ERROR) ?? (typeof confirmed.error === "string" ? confirmed.error : null);
      throw await releaseReservation(
        call,
        authorization,
        `the MPP payment was not confirmed: ${confirmation.status}${refusal === null ? "" : ` ${refusal}`}`,
      );
    }
    // The money moved with the confirmation: close the reservation before using the session.
    const explorer = await completeReservation(call, authorization.reservationId, txHash);
    if (token === null) throw new PaymentError(`the MPP payment ${txHash} was confirmed without an ${X_MPP_SESSION} token`);

    const paid = await call.callApi({ [X_MPP_SESSION]: token }, true);
    if (paid.status === 402) {
      const refusal = paid.headers.get(X_MPP_ERROR);
      throw new PaymentError(`paid ${txHash}, but ${call.endpoint} refused the new session${refusal === null ? "" : `: ${refusal}`}`);
    }
    const receipt = readMppReceipt(paid.headers, paid.data);
    const sessionId = receipt?.sessionId ?? (typeof confirmed.sessionId === "string" ? confirmed.sessionId : undefined);
    if (request.sessionSupported) {
      const amountUnits = usdcToUnits(authorization.amount.usdc);
      call.shared.sessions.put(call.sessionScope, call.origin, {
        token: paid.headers.get(X_MPP_SESSION) ?? token,
        amountUnits,
        ...(sessionId === undefined ? {} : { sessionId }),
      });
    }
    return {
      paid: true,
      status: paid.status,
      protocol: "mpp",
      amountPaid: authorization.amount,
      txHash,
      solanaExplorer: explorer ?? (await explorerLink(call, txHash)),
      data: paid.data,
      headers: headersObject(paid.headers),
      ...(sessionId === undefined ? {} : { sessionId }),
    };
  },
};

/** A held MPP session (spec 4.4 step 5): its token goes with the first request of its origin. */
export const mppSession = {
  held(call: PayCall): MppSession | undefined {
    return call.budgeted ? undefined : call.shared.sessions.get(call.sessionScope, call.origin);
  },

  headers(session: MppSession): Record<string, string> {
    return { [X_MPP_SESSION]: session.token };
  },

  /** The session is of no further use for the origin. */
  forget(call: PayCall): void {
    call.shared.sessions.forget(call.sessionScope, call.origin);
  },

  /**
   * The answer (not a 402) to a request that carried the session's token: paid by the session
   * when it carries an MPP receipt (no authorization round trip), else the endpoint's own answer.
   */
  async answered(call: PayCall, session: MppSession, answer: ApiAnswer): Promise<PaymentResult> {
    const receipt = readMppReceipt(answer.headers, answer.data);
    if (receipt !== undefined) return sessionPaid(call, answer, session, receipt);
    if (answer.headers.get(X_MPP_ERROR) !== null) {
      // The service refused the session without a new 402 (e.g. a charge the policy
      // refused, answered as a problem with `errorClass`): the token is of no further use.
      mppSession.forget(call);
      if (isRecord(answer.data) && typeof answer.data.errorClass === "string") throw errorFromProblem(answer.status, answer.data);
    }
    return unpaid(answer);
  },
};

async function sessionPaid(call: PayCall, answer: ApiAnswer, session: MppSession, receipt: MppReceipt): Promise<PaymentResult> {
  const refreshed = answer.headers.get(X_MPP_SESSION);
  const sessionId = receipt.sessionId ?? session.sessionId;
  if (refreshed !== null && refreshed !== session.token) {
    call.shared.sessions.put(call.sessionScope, call.origin, {
      ...session,
      token: refreshed,
      ...(sessionId === undefined ? {} : { sessionId }),
    });
  }
  let amountUnits = session.amountUnits;
  if (receipt.charged === false) amountUnits = 0n;
  else if (receipt.amount !== undefined) amountUnits = decimalToUnits(receipt.amount.value);
  const txHash = receipt.txHash!;
  return {
    paid: true,
    status: answer.status,
    protocol: "mpp",
    amountPaid: { usdc: unitsToUsdc(amountUnits) },
    txHash,
    solanaExplorer: await explorerLink(call, txHash),
    data: answer.data,
    headers: headersObject(answer.headers),
    ...(sessionId === undefined ? {} : { sessionId }),
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
