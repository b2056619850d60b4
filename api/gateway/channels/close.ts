/**
 * Closing a session (`POST /v1/channels/{channel}/close`, the payer's account), as the program's
 * authority. The gateway does not hold the payee's key, so the close is the program's two-step one
 * (docs/ledger.md §5): first every accepted charge is settled (settle.ts batches), then
 * `close_channel` requests the close (the withdraw delay starts; the payee may still settle during
 * it, through the gateway), then, once the delay has passed, `refund_channel` returns
 * `deposit − settled` to the agent's wallet and deletes channel and escrow (rent back to the
 * authority). At the refund the session is `closed`: charges up to the chain's settled sequence
 * are settled, the rest `void` (signed, never accepted, never paid), and the deposit's reservation
 * ends at the settled amount (the unused deposit returns to the budget).
 *
 * Every step is decided by the Channel account, so a crash anywhere is resumed by running the same
 * step again: no close request on chain → request it; requested and the delay passed → refund;
 * no account → it was refunded (closed). Requests and refunds are never double effects: the
 * program refuses a second close request (`ChannelClosing`) and a refund of a deleted channel.
 */
import { setTimeout as delay } from "node:timers/promises";
import { withTransaction } from "../../../indexer/db/database.js";
import { closeChannelInstruction, refundChannelInstruction } from "../../../programs/payment_ledger/ts/index.js";
import { channelRef, endExposureReservation } from "../../shared/policy/store.js";
import { submit } from "../wallets/ledger.js";
import { readChannel, signChannelTransaction } from "./chain.js";
import { type ChannelDeps, optionalKey, sessionAccounts } from "./deps.js";
import { channelNotFound, channelNotOpen, channelPending } from "./errors.js";
import { adoptChainSettlements, settleAccepted } from "./settle.js";
import { findSession, lockSession, markClosed, markClosing, type SessionRow } from "./store.js";

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
  const accounts = sessionAccounts(session);
  const settled = await settleAccepted(deps, channel, true);
  if (settled.pending) throw channelPending(channel, "a settlement");
  let state = await readChannel(deps.ledger, accounts.channel);
  if (state === null) return finishClosed(deps, channel, null);
  if (state.closeRequestedAtSeconds === null) {
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
    if (state === null) return finishClosed(deps, channel, null);
    if (state.closeRequestedAtSeconds === null) throw channelPending(channel, "close_channel");
  } else if (session.status === "open") {
    await markClosing(deps.pool, channel, session.closeTx ?? "unknown");
  }
  const refundAt = (state.closeRequestedAtSeconds + state.withdrawDelaySeconds) * 1000;
  if (Date.now() < refundAt) {
    if (!wait) return (await findSession(deps.pool, channel))!;
    await delay(refundAt - Date.now() + 1_000);
  }
  // Charges the payee presented during the delay settle before the refund ends the channel; what
  // it settled itself is adopted, so every charge the refund counts as paid has its transaction.
  const last = await settleAccepted(deps, channel, true);
  if (last.pending) throw channelPending(channel, "a settlement");
  await adoptChainSettlements(deps, channel);
  return refund(deps, session, wait);
}

const REFUND_ATTEMPTS = 10;

async function refund(deps: ChannelDeps, session: SessionRow, wait: boolean): Promise<SessionRow> {
  const accounts = sessionAccounts(session);
  for (let attempt = 1; ; attempt += 1) {
    const state = await readChannel(deps.ledger, accounts.channel);
    if (state === null) return finishClosed(deps, session.channel, null);
    const transaction = await signChannelTransaction(deps.ledger, [
      await refundChannelInstruction({ signer: deps.ledger.authority.publicKey, channel: accounts, rentPayer: state.rentPayer }),
    ]);
    const result = await submit(deps.ledger, transaction);
    if (result.status === "confirmed") {
      return finishClosed(deps, session.channel, {
        refundTx: transaction.signature,
        settledSequence: state.settled.sequence,
        settledUnits: state.settled.cumulativeUnits,
        refundedUnits: state.depositUnits - state.settled.cumulativeUnits,
      });
    }
    if (result.status === "pending") throw channelPending(session.channel, "refund_channel");
    // The ledger's clock may trail ours by a moment (WithdrawDelayNotElapsed): try again shortly.
    if (!wait || attempt >= REFUND_ATTEMPTS) return (await findSession(deps.pool, session.channel))!;
    await delay(1_000);
  }
}

/**
 * The channel is gone from the chain: refunded. With the refund's own reading of the account, its
 * figures; without (it was refunded by an attempt whose answer was lost), the session's settled state.
 */
async function finishClosed(
  deps: ChannelDeps,
  channel: string,
  refunded: { refundTx: string; settledSequence: bigint; settledUnits: bigint; refundedUnits: bigint } | null,
): Promise<SessionRow> {
  await withTransaction(
    deps.pool,
    async (client) => {
      const session = (await lockSession(client, channel))!;
      if (session.status === "closed") return;
      const sequence = refunded?.settledSequence ?? session.settledSequence;
      const settledUnits = refunded?.settledUnits ?? session.settledCumulative;
      const refundedUnits = refunded?.refundedUnits ?? session.depositUnits - settledUnits;
      const refundTx = refunded?.refundTx ?? null;
      await markClosed(client, channel, { sequence, cumulativeUnits: settledUnits, refundedUnits, refundTx });
      await endExposureReservation(client, channelRef(channel), settledUnits, refundTx ?? session.closeTx ?? channel);
    },
    { isolation: "read committed" },
  );
  return (await findSession(deps.pool, channel))!;
}
