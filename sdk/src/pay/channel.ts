/**
 * Payment channels (the `channelSessions` option; docs/sdk.md "Channel sessions"): an MPP
 * `session` challenge, or an x402 v2 `upto` one over our vouchers, is paid by a voucher on an
 * escrowed channel to its recipient instead of a transfer per request. The channel's own
 * reservation is taken when it opens (`ChannelSessionPayer.open`), so a voucher needs no
 * authorization here; with a known channel and price the voucher goes with the first request.
 */
import { headersObject } from "../api-call.js";
import {
  type ChannelPaid,
  type ChannelSessionPayer,
  readSessionChallenge,
  readUptoRequirement,
  type SessionChallenge,
} from "../channel-sessions.js";
import { PaymentError } from "../errors.js";
import { unitsToUsdc } from "../money.js";
import type { PaymentOffer } from "../payment-required.js";
import type { PayCall } from "./call.js";
import { explorerLink } from "./explorer.js";
import type { PaidResult } from "./result.js";

export const channelPayment = {
  /** Step 1 with a held channel: a known channel and a known price pay the first request (no 402). */
  async payHeld(call: PayCall): Promise<PaidResult | undefined> {
    const channels = channelsOf(call);
    if (channels === undefined) return undefined;
    const open = channels.get(call.sessionScope, call.origin);
    const price = channels.price(call.endpoint);
    if (open === undefined || price === undefined) return undefined;
    const paid = await channels.payRequest(open, call.request, price, call.signal);
    if (!("over" in paid)) return channelPaid(call, paid);
    channels.forget(call.sessionScope, call.origin);
    return undefined;
  },

  /** Step 2: the offer's channel challenge, the MPP session intent first, else x402 v2 `upto`. */
  challenge(call: PayCall, offer: PaymentOffer): SessionChallenge | undefined {
    if (channelsOf(call) === undefined) return undefined;
    return readSessionChallenge(offer.mppChallenges) ?? readUptoRequirement(offer.x402v2);
  },

  /**
   * Pays a channel challenge from a channel to its recipient: the open one of this origin, or a
   * new one. A channel the service or the gateway calls over is replaced once.
   */
  async pay(call: PayCall, session: SessionChallenge): Promise<PaidResult> {
    const channels = channelsOf(call)!;
    channels.learnPrice(call.endpoint, session.amountUnits);
    let open = channels.get(call.sessionScope, call.origin);
    if (open !== undefined && open.payee !== session.recipient) open = undefined;
    if (open !== undefined) open.offer = session;
    for (let attempt = 0; attempt < 2; attempt += 1) {
      open ??= await channels.open(call.agentId, call.sessionScope, call.origin, session, call.parentTxHash, call.endpoint);
      const paid = await channels.payRequest(open, call.request, session.amountUnits, call.signal);
      if (!("over" in paid)) return channelPaid(call, paid);
      channels.forget(call.sessionScope, call.origin);
      open = undefined;
    }
    throw new PaymentError(`${call.endpoint} refused a voucher on a freshly opened channel`);
  },
};

/** The client's channel payer, unless the call is an invocation's (held channels pay the scope's other calls). */
function channelsOf(call: PayCall): ChannelSessionPayer | undefined {
  return call.budgeted ? undefined : call.shared.channelSessions;
}

async function channelPaid(call: PayCall, paid: ChannelPaid): Promise<PaidResult> {
  const { channel } = paid;
  channel.explorer ??= await explorerLink(call, channel.openTx);
  return {
    paid: true,
    status: paid.answer.status,
    protocol: channel.offer.wire === "x402-upto" ? "x402" : "mpp",
    amountPaid: { usdc: unitsToUsdc(paid.amountUnits) },
    txHash: channel.openTx,
    solanaExplorer: channel.explorer,
    data: paid.answer.data,
    headers: headersObject(paid.answer.headers),
    sessionId: channel.channel,
    channel: {
      address: channel.channel,
      sequence: Number(paid.sequence),
      paymentId: paid.paymentId,
      cumulative: { usdc: unitsToUsdc(channel.cumulativeUnits) },
    },
  };
}
