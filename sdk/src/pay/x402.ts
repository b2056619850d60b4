/**
 * x402 in the spec's format (spec 2.7): the request again with the payment headers the gateway
 * signed; the answer's `X-PAYMENT-RESPONSE` names the settlement transaction, which completes
 * the reservation.
 */
import { type ApiAnswer, headersObject } from "../api-call.js";
import { isTransferAuthorization, type X402Authorization } from "../authorization.js";
import { readX402Receipt, X_PAYMENT_ERROR } from "../receipts.js";
import { explorerLink } from "./explorer.js";
import { completeReservation, releaseReservation } from "./reservation.js";
import type { ProtocolPayment } from "./strategy.js";

export const x402Payment: ProtocolPayment<X402Authorization> = {
  takes: (authorization): authorization is X402Authorization =>
    !isTransferAuthorization(authorization) && authorization.protocol === "x402",

  async pay(call, authorization) {
    let paid: ApiAnswer;
    try {
      paid = await call.callApi(authorization.headers, true);
    } catch (error) {
      throw await releaseReservation(call, authorization, `the paid request to ${call.endpoint} got no answer`, error);
    }
    const receipt = readX402Receipt(paid.headers);
    if (receipt === undefined || !receipt.success) {
      const refusal = paid.headers.get(X_PAYMENT_ERROR);
      throw await releaseReservation(
        call,
        authorization,
        `${call.endpoint} did not accept the payment: ${paid.status}${refusal === null ? " without a payment receipt" : ` ${refusal}`}`,
      );
    }
    const explorer = await completeReservation(call, authorization.reservationId, receipt.transaction);
    return {
      paid: true,
      status: paid.status,
      protocol: "x402",
      amountPaid: authorization.amount,
      txHash: receipt.transaction,
      solanaExplorer: explorer ?? (await explorerLink(call, receipt.transaction, receipt.network)),
      data: paid.data,
      headers: headersObject(paid.headers),
    };
  },
};
