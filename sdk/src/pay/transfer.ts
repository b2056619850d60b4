/**
 * A real x402 / MPP payment (a payee running the official packages): the request again with the
 * signed transfer; its receipt names the transfer's transaction, which the gateway checks on the
 * ledger and records. Refused or unanswered, the reservation is released if it still can be; a
 * signed transfer cannot be released while it may still land (`PAYMENT_OUTCOME_UNKNOWN`, the
 * gateway closes it once its blockhash expired).
 */
import { type ApiAnswer, headersObject } from "../api-call.js";
import { isTransferAuthorization, type TransferAuthorization } from "../authorization.js";
import { readPaymentReceipt } from "../receipts.js";
import { explorerLink } from "./explorer.js";
import { recordTransfer, releaseReservation } from "./reservation.js";
import type { ProtocolPayment } from "./strategy.js";

export const transferPayment: ProtocolPayment<TransferAuthorization> = {
  takes: (authorization): authorization is TransferAuthorization => isTransferAuthorization(authorization),

  async pay(call, authorization) {
    let paid: ApiAnswer;
    try {
      paid = await call.callApi(authorization.headers, true);
    } catch (error) {
      throw await releaseReservation(call, authorization, `the paid request to ${call.endpoint} got no answer`, error);
    }
    const receipt = readPaymentReceipt(authorization.format, paid.headers);
    if (paid.status < 200 || paid.status > 299 || receipt === undefined || !receipt.success || receipt.transaction === undefined) {
      const reason = typeof receipt?.value.errorReason === "string" ? ` (${receipt.value.errorReason})` : "";
      throw await releaseReservation(
        call,
        authorization,
        `${call.endpoint} did not accept the ${authorization.format} payment: ${paid.status}${receipt === undefined ? " without a payment receipt" : reason}`,
      );
    }
    const settlementTxHash = receipt.transaction;
    const recorded = await recordTransfer(call, authorization.reservationId, settlementTxHash);
    const txHash = recorded?.txHash ?? settlementTxHash;
    return {
      paid: true,
      status: paid.status,
      protocol: authorization.protocol,
      amountPaid: authorization.amount,
      txHash,
      solanaExplorer: recorded?.solanaExplorer ?? (await explorerLink(call, txHash)),
      data: paid.data,
      headers: headersObject(paid.headers),
      settlementTxHash,
      format: authorization.format,
      receipt,
    };
  },
};
