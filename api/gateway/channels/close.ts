/**
 * Closing a session (`POST /v1/channels/{channel}/close`, the payer's account), as the program's
 * authority, with the program's two-step close (docs/ledger.md §5): accepted charges are settled
 * (settle.ts), `close_channel` starts the withdraw delay (the payee may still settle), then
 * `refund_channel` returns the remainder to the agent's wallet. Past the channel's expiry the
 * agent's own `force_close_channel` is used instead. A payee's closed token account is recreated.
 *
 * The figures are the chain's: the `ChannelClosed` event says what was settled and refunded; every
 * `ChannelSettled` before it is adopted first (history.ts); charges beyond its sequence are `void`
 * and the deposit's reservation ends at its settled amount. Each step is decided by the chain, so
 * a crash is resumed by running the same step again; a refused close is `channel_close_refused`.
 */
import { setTimeout as delay } from "node:timers/promises";
import { PublicKey } from "@solana/web3.js";
import { withTransaction } from "../../../indexer/db/database.js";
import {
  closeChannelInstruction,
  forceCloseChannelInstruction,
  refundChannelInstruction,
} from "../../../programs/payment_ledger/ts/index.js";
import { channelRef, endExposureReservation } from "../reservations/store.js";
import { failureText, ledgerRefusal, submitFailure } from "../chain/ledger-errors.js";
import { submit } from "../chain/ledger.js";
import { ensurePayeeTokenAccount, readChannel, signChannelTransaction } from "./chain.js";
import { type ChannelDeps, optionalKey, sessionAccounts } from "./deps.js";
import { channelCloseRefused, channelNotFound, channelNotOpen, channelPending } from "./errors.js";
import { channelHistory } from "./history.js";
import { adoptChainSettlements, resolveSettlement, settleAccepted } from "./settle.js";
import { findSession, lockSession, markClosed, markCloseRefused, markClosing, pendingSettlement, type SessionRow } from "./store.js";

/** A close waits for the refund when the withdraw delay is at most this; longer ones finish in the loop. */
export const SYNC_REFUND_MAX_SECONDS = 10;

/** The payer's account asks to close: settles, requests the close, and refunds when the delay allows. */
export async function closeSession(deps: ChannelDeps, channel: string, accountId: string): Promise<SessionRow> {
  const session = await findSession(deps.pool, channel);
  if (session === null || session.accountId !== accountId) throw channelNotFound(channel);
  if (session.status === "closed") return session;
  if (session.status === "opening" || session.status === "failed") throw channelNotOpen(channel, session.status);
  return advanceClose(deps, session, session.withdrawDelaySeconds <= SYNC_REFUND_MAX_SECONDS);
}

/**
 * One step or more of a close from where the chain stands; `wait` sleeps through the withdraw
 * delay to refund now. Answers the session afterwards (`closing` until refunded).
 */
export async function advanceClose(deps: ChannelDeps, session: SessionRow, wait: boolean): Promise<SessionRow> {
  const channel = session.channel;
  const accounts = sessionAccounts(session, deps.ledger.programId);
  let state = await readChannel(deps.ledger, accounts.channel);
  if (state === null) return finishClosed(deps, session, wait);
  const settled = await settleAccepted(deps, channel, true);
  if (settled.pending) throw channelPending(channel, "a settlement");
  if (Date.now() >= session.expiresAt.getTime()) return forceClose(deps, session);
  if (state.closeRequestedAtSeconds === null) {
    await ensurePayeeTokenAccount(deps.ledger, accounts.payee, accounts.mint);
    const request = await signChannelTransaction(deps.ledger, [
      await closeChannelInstruction({
        signer: deps.ledger.authority.publicKey,
        channel: accounts,
        finalSettlement: null,
        invocation: optionalKey(session.invocation),
      }),
    ]);
    // `closing` before the send: from here no voucher is signed, whatever the outcome.
    await markClosing(deps.pool, channel, request.signature);
    const result = await submit(deps.ledger, request);
    if (result.status === "pending") throw channelPending(channel, "close_channel");
    state = await readChannel(deps.ledger, accounts.channel);
    if (state === null) return finishClosed(deps, session, wait);
    if (result.status !== "confirmed" && state.closeRequestedAtSeconds === null) {
      // Refused by the program (or the RPC): recorded as such; the loop tries again, and past the
      // expiry the force close needs nothing the payee controls.
      const refusal = ledgerRefusal(submitFailure(result, request), deps.ledger.programId);
      const reason = refusal === null ? failureText(result) : `${refusal.name}: ${refusal.message}`;
      await markCloseRefused(deps.pool, channel, `close_channel refused: ${reason}`);
      throw channelCloseRefused(channel, reason, session.expiresAt);
    }
    // Requested by someone else meanwhile (the payee): its request stands, ours did not land.
    if (result.status !== "confirmed") await markClosing(deps.pool, channel, null);
  } else if (session.status === "open") {
    // The payee requested the close itself.
    await markClosing(deps.pool, channel, null);
  }
  const refundAt = (state.closeRequestedAtSeconds! + state.withdrawDelaySeconds) * 1000;
  if (Date.now() < refundAt) {
    if (!wait) return (await findSession(deps.pool, channel))!;
    await delay(refundAt - Date.now() + 1_000);
  }
  // Charges the payee presented during the delay settle before the refund ends the channel.
  const last = await settleAccepted(deps, channel, true);
  if (last.pending) throw channelPending(channel, "a settlement");
  return refund(deps, session, wait);
}

const REFUND_ATTEMPTS = 10;

async function refund(deps: ChannelDeps, session: SessionRow, wait: boolean): Promise<SessionRow> {
  const accounts = sessionAccounts(session, deps.ledger.programId);
  for (let attempt = 1; ; attempt += 1) {
    const state = await readChannel(deps.ledger, accounts.channel);
    if (state === null) return finishClosed(deps, session, wait);
    const transaction = await signChannelTransaction(deps.ledger, [
      await refundChannelInstruction({ signer: deps.ledger.authority.publicKey, channel: accounts, rentPayer: state.rentPayer }),
    ]);
    const result = await submit(deps.ledger, transaction);
    if (result.status === "confirmed") return finishClosed(deps, session, wait);
    if (result.status === "pending") throw channelPending(session.channel, "refund_channel");
    // The ledger's clock may trail ours by a moment (WithdrawDelayNotElapsed), or the payee ended
    // the channel first (then the next read finds it gone): look again shortly.
    if (!wait || attempt >= REFUND_ATTEMPTS) {
      if ((await readChannel(deps.ledger, accounts.channel)) === null) return finishClosed(deps, session, wait);
      return (await findSession(deps.pool, session.channel))!;
    }
    await delay(1_000);
  }
}

/** Past the expiry: the payer's own close, signed with the agent's key; the payee's part is not needed. */
async function forceClose(deps: ChannelDeps, session: SessionRow): Promise<SessionRow> {
  const accounts = sessionAccounts(session, deps.ledger.programId);
  const state = await readChannel(deps.ledger, accounts.channel);
  if (state === null) return finishClosed(deps, session, false);
  const payer = await deps.keys.get(session.agentId);
  const transaction = await signChannelTransaction(
    deps.ledger,
    [await forceCloseChannelInstruction({ signer: payer.publicKey, channel: accounts, rentPayer: state.rentPayer })],
    [payer],
  );
  if (session.status === "open") await markClosing(deps.pool, session.channel, null);
  const result = await submit(deps.ledger, transaction);
  if (result.status === "pending") throw channelPending(session.channel, "force_close_channel");
  if (result.status !== "confirmed" && (await readChannel(deps.ledger, accounts.channel)) !== null) {
    // The ledger's clock may trail ours (ChannelNotExpired): the loop tries again.
    const refusal = ledgerRefusal(submitFailure(result, transaction), deps.ledger.programId);
    if (refusal?.name === "ChannelNotExpired") return (await findSession(deps.pool, session.channel))!;
    const reason = refusal === null ? failureText(result) : `${refusal.name}: ${refusal.message}`;
    await markCloseRefused(deps.pool, session.channel, `force_close_channel refused: ${reason}`);
    throw channelCloseRefused(session.channel, reason, session.expiresAt);
  }
  return finishClosed(deps, session, false);
}

/**
 * The channel is gone from the chain: its end is read from the `ChannelClosed` event of the
 * transaction that did it, the settlements before it adopted, and the session closed with the
 * event's figures; the deposit's reservation ends at the settled amount.
 */
async function finishClosed(deps: ChannelDeps, session: SessionRow, wait: boolean): Promise<SessionRow> {
  const channel = session.channel;
  const pending = await pendingSettlement(deps.pool, channel);
  if (pending !== null && (await resolveSettlement(deps, pending, wait)) === "pending") throw channelPending(channel, "a settlement");
  const history = await channelHistory(deps.ledger, new PublicKey(channel));
  const closed = history.closed;
  if (closed === null) throw channelPending(channel, "the channel's close record");
  await adoptChainSettlements(deps, channel, history);
  await withTransaction(
    deps.pool,
    async (client) => {
      const locked = (await lockSession(client, channel))!;
      if (locked.status === "closed") return;
      await markClosed(client, channel, {
        sequence: closed.sequence,
        cumulativeUnits: closed.settledUnits,
        refundedUnits: closed.refundedUnits,
        refundTx: closed.signature,
      });
      await endExposureReservation(client, channelRef(channel), closed.settledUnits, closed.signature);
    },
    { isolation: "read committed" },
  );
  return (await findSession(deps.pool, channel))!;
}
