/**
 * Settlement of channel charges (`POST /v1/channels/{channel}/settlements`, and the loop).
 *
 * Presentation: a payee presents the highest voucher it accepted and the charges since its last
 * one; the gateway checks it against its own rows (a voucher it signed, a valid signature, charges
 * chaining to the voucher's digest, so every id, amount and endpoint is what was signed) and marks
 * them `accepted`, only forward. Presenting twice never settles twice.
 *
 * Settlement, as the program's authority: accepted charges in batches of at most
 * `MAX_CHARGES_PER_SETTLEMENT` per settle_channel, each with the voucher signed at its last charge
 * (no new signature of the payer). Per batch, under the row lock and with no settlement of the
 * channel pending, the transaction is signed and its `channel_settlement_sends` row committed
 * before it is sent; a pending row is resolved first, by its own signature's status only. So
 * nothing is settled twice and nothing accepted is lost. Settlements the chain made outside the
 * gateway are adopted from the channel's history (history.ts).
 */
import { setTimeout as delay } from "node:timers/promises";
import { ComputeBudgetProgram, PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { withTransaction } from "../../../indexer/db/database.js";
import {
  type ChannelCharge,
  initialChargesDigest,
  nextChargesDigest,
  settleChannelInstruction,
  settlementComputeUnits,
  verifyVoucherSignature,
  voucherMessage,
  voucherSignatureInstruction,
  endpointText,
} from "../../../programs/payment_ledger/ts/index.js";
import { failureText, ledgerRefusal, submitFailure } from "../chain/ledger-errors.js";
import { awaitOutcome, lookUpOutcomes, type SignedTransaction, submit } from "../chain/ledger.js";
import { ensurePayeeTokenAccount, readChannel, signChannelTransaction } from "./chain.js";
import { type ChannelDeps, optionalKey, sessionAccounts } from "./deps.js";
import { type ChannelHistory, channelHistory } from "./history.js";
import { chargesMismatch, channelClosed, channelNotFound, channelNotOpen, voucherInvalid, voucherUnknown } from "./errors.js";
import {
  applyConfirmedSettlement,
  type ChargeRow,
  chargesBetween,
  findSession,
  insertAdoptedSettlement,
  insertSettlementIntent,
  lockSession,
  markAccepted,
  markSettlementFailed,
  pendingSettlement,
  type SessionRow,
  type SettlementIntent,
} from "./store.js";

/** docs/ledger.md §5 "Cost per settlement": 25 charges of one endpoint fill a packet. */
export const MAX_CHARGES_PER_SETTLEMENT = 25;
/** Charges one presentation may carry (a payee presents often; a bound on the work of one request). */
export const MAX_PRESENTED_CHARGES = 10_000;
/** Batches one settling pass sends for a channel before it yields. */
const MAX_BATCHES_PER_PASS = 400;
/** Batches a presentation's request waits for (200 charges); the loop settles the rest. */
export const MAX_BATCHES_PER_REQUEST = 8;

/** How long a signed batch may reuse a cached blockhash (chain/ledger.ts `recentBlockhash`), with a margin. */
const BLOCKHASH_REUSE_MS = 1_200;

export interface PresentedCharge {
  readonly sequence: bigint;
  readonly paymentId: bigint;
  readonly amountUnits: bigint;
  /** URL or host/path. */
  readonly endpoint: string;
}

export interface Presentation {
  readonly channel: string;
  readonly cumulativeUnits: bigint;
  readonly sequence: bigint;
  /** base58. */
  readonly signature: string;
  readonly charges: readonly PresentedCharge[];
}

/** Checks the presented voucher and charges against the signed rows, and marks them accepted. */
export async function acceptPresentation(deps: ChannelDeps, p: Presentation): Promise<SessionRow> {
  const session = await findSession(deps.pool, p.channel);
  if (session === null) throw channelNotFound(p.channel);
  if (session.status === "opening" || session.status === "failed") throw channelNotOpen(p.channel, session.status);
  if (p.sequence < 1n || p.sequence > session.signedSequence) throw voucherUnknown(p.sequence);
  const signatureBytes = decodeSignature(p.signature);
  const [voucherRow] = await chargesBetween(deps.pool, p.channel, p.sequence, p.sequence);
  if (voucherRow === undefined) throw voucherUnknown(p.sequence);
  if (voucherRow.cumulativeUnits !== p.cumulativeUnits) {
    throw voucherInvalid(
      `cumulative: voucher ${p.sequence} is for ${voucherRow.cumulativeUnits} units, not ${p.cumulativeUnits}`,
      "cumulative",
    );
  }
  const channelKey = new PublicKey(p.channel);
  const message = voucherMessage(channelKey, {
    cumulativeUnits: p.cumulativeUnits,
    sequence: p.sequence,
    chargesDigest: voucherRow.digest,
  });
  if (!verifyVoucherSignature(new PublicKey(session.payer), message, signatureBytes)) {
    throw voucherInvalid("signature: not the payer's signature over this voucher");
  }
  if (p.sequence <= session.acceptedSequence) return session;
  // After the refund the channel is gone: what was not accepted by then was never paid (void).
  if (session.status === "closed") throw channelClosed(p.channel, session.status);
  await checkCharges(deps, session, p);
  await withTransaction(
    deps.pool,
    async (client) => {
      const locked = (await lockSession(client, p.channel))!;
      if (p.sequence > locked.acceptedSequence) await markAccepted(client, p.channel, p.sequence, p.cumulativeUnits);
    },
    { isolation: "read committed" },
  );
  return (await findSession(deps.pool, p.channel))!;
}

/**
 * The presented charges are contiguous, end at the voucher, start at or before the first one not
 * yet accepted, and chained from the digest before them reach the voucher's: exactly what was signed.
 */
async function checkCharges(deps: ChannelDeps, session: SessionRow, p: Presentation): Promise<void> {
  const charges = p.charges;
  if (charges.length === 0) throw chargesMismatch(`give the charges since voucher ${session.acceptedSequence}`);
  if (charges.length > MAX_PRESENTED_CHARGES) throw chargesMismatch(`at most ${MAX_PRESENTED_CHARGES} charges per presentation`);
  const first = charges[0]!.sequence;
  if (first < 1n || first > session.acceptedSequence + 1n) {
    throw chargesMismatch(`must start at or before sequence ${session.acceptedSequence + 1n}, the first not yet accepted`);
  }
  for (const [i, charge] of charges.entries()) {
    if (charge.sequence !== first + BigInt(i))
      throw chargesMismatch(`charge ${i} has sequence ${charge.sequence}, expected ${first + BigInt(i)}`);
  }
  if (charges[charges.length - 1]!.sequence !== p.sequence) throw chargesMismatch(`must end at the voucher's sequence ${p.sequence}`);
  const rows = await chargesBetween(deps.pool, p.channel, first === 1n ? 1n : first - 1n, p.sequence, MAX_PRESENTED_CHARGES + 1);
  let digest: Uint8Array;
  let offset = 0;
  if (first === 1n) {
    digest = initialChargesDigest(new PublicKey(p.channel), session.openedSlot!);
  } else {
    digest = rows[0]!.digest;
    offset = 1;
  }
  for (const [i, charge] of charges.entries()) {
    const row = rows[i + offset];
    if (row === undefined || row.sequence !== charge.sequence) throw chargesMismatch(`no signed charge ${charge.sequence}`);
    if (row.paymentId !== charge.paymentId || row.amountUnits !== charge.amountUnits || row.endpoint !== endpointText(charge.endpoint)) {
      throw chargesMismatch(`charge ${charge.sequence} is not the one signed (payment id, amount or endpoint differs)`);
    }
    digest = nextChargesDigest(digest, { paymentId: charge.paymentId, amountUnits: charge.amountUnits, endpointHash: row.endpointHash });
  }
  if (!Buffer.from(digest).equals(Buffer.from(rows[rows.length - 1]!.digest))) {
    throw chargesMismatch("the charges do not chain to the voucher's digest");
  }
}

function decodeSignature(text: string): Uint8Array {
  let bytes: Uint8Array;
  try {
    bytes = bs58.decode(text);
  } catch {
    throw voucherInvalid("signature: not base58");
  }
  if (bytes.length !== 64) throw voucherInvalid("signature: must be 64 bytes");
  return bytes;
}

export interface SettleReport {
  readonly sent: number;
  readonly confirmed: number;
  readonly failed: number;
  /** A settlement still pending (unknown outcome): resolved by a later pass. */
  readonly pending: boolean;
  /** The channel account is gone (ended on chain): only its close remains to record. */
  readonly gone?: boolean;
}

/**
 * Settles the channel's accepted charges in batches, first resolving a pending settlement (its
 * bytes re-sent). Call it through the channel's queue (one pass per channel at a time in a
 * process); `wait` waits for a pending settlement's outcome instead of only looking it up.
 */
export async function settleAccepted(
  deps: ChannelDeps,
  channel: string,
  wait = true,
  maxBatches = MAX_BATCHES_PER_PASS,
): Promise<SettleReport> {
  let sent = 0;
  let confirmed = 0;
  let failed = 0;
  const pending = await pendingSettlement(deps.pool, channel);
  if (pending !== null) {
    const outcome = await resolveSettlement(deps, pending, wait);
    if (outcome === "pending") return { sent, confirmed, failed, pending: true };
  }
  for (let batch = 0; batch < Math.min(maxBatches, MAX_BATCHES_PER_PASS); batch += 1) {
    const intent = await prepareBatch(deps, channel);
    if (intent === null) break;
    sent += 1;
    const result = await submit(deps.ledger, intentTransaction(intent));
    if (result.status === "confirmed") {
      await applyConfirmed(deps, intent, result.slot);
      confirmed += 1;
      continue;
    }
    if (result.status === "pending") return { sent, confirmed, failed, pending: true };
    const refusal = ledgerRefusal(submitFailure(result, intentTransaction(intent)), deps.ledger.programId);
    await markSettlementFailed(deps.pool, intent.signature, refusal === null ? failureText(result) : `${refusal.name}: ${refusal.message}`);
    failed += 1;
    // Settled on chain by someone else (the payee with a voucher it holds): adopt it, go on.
    if ((await adoptChainSettlements(deps, channel)) > 0) continue;
    const session = (await findSession(deps.pool, channel))!;
    const accounts = sessionAccounts(session, deps.ledger.programId);
    // Ended on chain without the gateway (the payee closed and refunded): the close finishes it.
    if ((await readChannel(deps.ledger, accounts.channel)) === null) return { sent, confirmed, failed, pending: false, gone: true };
    // The payee closed its token account: recreated, the charges settle in the next batch (under
    // a newer blockhash: the refused bytes, signed again with the same one, could never land).
    if (await ensurePayeeTokenAccount(deps.ledger, accounts.payee, accounts.mint)) {
      await delay(BLOCKHASH_REUSE_MS);
      continue;
    }
    break;
  }
  return { sent, confirmed, failed, pending: false };
}

function intentTransaction(intent: SettlementIntent): SignedTransaction {
  return { signature: intent.signature, wire: intent.wire, lastValidBlockHeight: intent.lastValidBlockHeight };
}

/** Under the row lock: the next batch's transaction, signed and recorded `pending`; null when nothing is to settle. */
async function prepareBatch(deps: ChannelDeps, channel: string): Promise<SettlementIntent | null> {
  return withTransaction(
    deps.pool,
    async (client) => {
      const session = await lockSession(client, channel);
      if (session === null || (session.status !== "open" && session.status !== "closing")) return null;
      if (session.acceptedSequence <= session.settledSequence) return null;
      if ((await pendingSettlement(client, channel)) !== null) return null;
      const rows = await chargesBetween(
        client,
        channel,
        session.settledSequence + 1n,
        session.acceptedSequence,
        MAX_CHARGES_PER_SETTLEMENT,
      );
      if (rows.length === 0) return null;
      const signed = await signBatch(deps, session, rows);
      const intent: SettlementIntent = {
        signature: signed.transaction.signature,
        channel,
        fromSequence: rows[0]!.sequence,
        toSequence: rows[signed.count - 1]!.sequence,
        cumulativeUnits: rows[signed.count - 1]!.cumulativeUnits,
        wire: signed.transaction.wire,
        lastValidBlockHeight: signed.transaction.lastValidBlockHeight,
      };
      await insertSettlementIntent(client, intent);
      return intent;
    },
    { isolation: "read committed" },
  );
}

/** The largest prefix of `rows` (≤ 25) whose settlement fits in one packet, signed by the authority. */
async function signBatch(
  deps: ChannelDeps,
  session: SessionRow,
  rows: readonly ChargeRow[],
): Promise<{ transaction: SignedTransaction; count: number }> {
  const accounts = sessionAccounts(session, deps.ledger.programId);
  const payer = new PublicKey(session.payer);
  for (let count = rows.length; count >= 1; count = Math.min(count - 1, Math.floor(count * 0.8))) {
    const batch = rows.slice(0, count);
    const last = batch[batch.length - 1]!;
    const charges: ChannelCharge[] = batch.map((row) => ({
      paymentId: row.paymentId,
      amountUnits: row.amountUnits,
      endpointHash: row.endpointHash,
    }));
    const message = voucherMessage(accounts.channel, {
      cumulativeUnits: last.cumulativeUnits,
      sequence: last.sequence,
      chargesDigest: last.digest,
    });
    try {
      const transaction = await signChannelTransaction(deps.ledger, [
        ComputeBudgetProgram.setComputeUnitLimit({ units: settlementComputeUnits(count) }),
        voucherSignatureInstruction(payer, message, bs58.decode(last.signature)),
        await settleChannelInstruction({
          settler: deps.ledger.authority.publicKey,
          channel: accounts,
          settlement: { cumulativeUnits: last.cumulativeUnits, sequence: last.sequence, charges },
          invocation: optionalKey(session.invocation),
        }),
      ]);
      return { transaction, count };
    } catch (error) {
      // Too many distinct endpoints for one packet: fewer charges.
      if (count === 1 || !/too large|encoding overruns/i.test(String(error))) throw error;
    }
  }
  throw new Error("unreachable: a settlement of one charge always fits");
}

async function applyConfirmed(deps: ChannelDeps, intent: SettlementIntent, slot: number | null): Promise<void> {
  await withTransaction(
    deps.pool,
    async (client) => {
      await lockSession(client, intent.channel);
      await applyConfirmedSettlement(client, intent, slot);
    },
    { isolation: "read committed" },
  );
}

/**
 * A pending settlement after a crash or an unknown outcome, decided by its own signature's status
 * only (another transaction settling the same charges proves nothing about this one): confirmed
 * when it landed, failed once it can never land. What the chain settled otherwise is adopted from
 * the channel's history (`adoptChainSettlements`).
 */
export async function resolveSettlement(
  deps: ChannelDeps,
  intent: SettlementIntent,
  wait: boolean,
): Promise<"confirmed" | "failed" | "pending"> {
  // The same signed bytes again: a crash may have come before they were ever sent, and they land
  // at most once.
  await deps.ledger.connection
    .sendRawTransaction(Buffer.from(intent.wire, "base64"), { skipPreflight: true, maxRetries: 0 })
    .catch(() => undefined);
  const [outcome] = wait
    ? [await awaitOutcome(deps.ledger, intentTransaction(intent))]
    : await lookUpOutcomes(deps.ledger, [intentTransaction(intent)]);
  if (outcome!.status === "confirmed") {
    await applyConfirmed(deps, intent, outcome!.slot);
    return "confirmed";
  }
  if (outcome!.status === "pending") return "pending";
  await markSettlementFailed(
    deps.pool,
    intent.signature,
    outcome!.reason === "expired" ? "expired before it landed" : "included with an error",
  );
  await adoptChainSettlements(deps, intent.channel);
  return "failed";
}

/**
 * The chain settled the channel further than the gateway's records (the payee, which may settle
 * any voucher it holds itself, also in its own close; or an earlier gateway whose row is gone):
 * each such `ChannelSettled` is read from the channel's history (also once the account is gone)
 * and recorded as a confirmed settlement of exactly the charges it covered, so the charges are
 * `settled` with the transaction that paid them. Answers how many were adopted.
 */
export async function adoptChainSettlements(deps: ChannelDeps, channel: string, history?: ChannelHistory): Promise<number> {
  const session = await findSession(deps.pool, channel);
  if (session === null || (await pendingSettlement(deps.pool, channel)) !== null) return 0;
  const key = new PublicKey(channel);
  if (history === undefined) {
    const state = await readChannel(deps.ledger, key);
    if (state !== null && state.settled.sequence <= session.settledSequence) return 0;
  }
  const settlements = (history ?? (await channelHistory(deps.ledger, key))).settlements;
  let adopted = 0;
  for (const settlement of settlements) {
    if (settlement.toSequence <= session.settledSequence) continue;
    const intent: SettlementIntent = {
      signature: settlement.signature,
      channel,
      fromSequence: settlement.fromSequence,
      toSequence: settlement.toSequence,
      cumulativeUnits: settlement.cumulativeUnits,
      wire: "",
      lastValidBlockHeight: 0,
    };
    const applied = await withTransaction(
      deps.pool,
      async (client) => {
        const locked = (await lockSession(client, channel))!;
        if (locked.settledSequence >= settlement.toSequence) return false;
        await insertAdoptedSettlement(client, intent, settlement.slot);
        await applyConfirmedSettlement(client, intent, settlement.slot);
        return true;
      },
      { isolation: "read committed" },
    );
    if (applied) adopted += 1;
  }
  return adopted;
}
