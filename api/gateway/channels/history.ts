/**
 * A channel's money as the chain recorded it: the program's events (`ChannelSettled`,
 * `ChannelClosed`) in the transactions that touched the channel's address, whoever sent them (the
 * gateway, or the payee with its own key). Found through the address's signature history, so they
 * are read the same way whether the Channel account still exists or was closed; decoded with the
 * program's own event decoder (programs/payment_ledger/ts/events.ts, the one the indexer uses).
 * These events, not an account read made at some other moment nor a sequence number, are the truth
 * for what was settled, which charges each settlement covered, and what the close refunded.
 */
import type { PublicKey } from "@solana/web3.js";
import { decodeTransactionEvents, eventsNamed } from "../../../programs/payment_ledger/ts/index.js";
import { COMMITMENT, type SettlementLedger } from "../chain/ledger.js";

/** One `ChannelSettled`: charges `fromSequence..toSequence` paid, the cumulative after them. */
export interface ChainSettlement {
  readonly signature: string;
  readonly slot: number;
  readonly fromSequence: bigint;
  readonly toSequence: bigint;
  readonly cumulativeUnits: bigint;
}

/** The `ChannelClosed` that ended the channel: what left the escrow to the payee and back to the payer. */
export interface ChainClose {
  readonly signature: string;
  readonly slot: number;
  readonly settledUnits: bigint;
  readonly refundedUnits: bigint;
  readonly sequence: bigint;
  readonly forced: boolean;
}

export interface ChannelHistory {
  /** In chain order. */
  readonly settlements: readonly ChainSettlement[];
  readonly closed: ChainClose | null;
}

const PAGE = 1_000;
/** A history longer than this is refused loudly rather than read in part (its oldest events lost). */
const MAX_PAGES = 1_000;

/** Every successful transaction of the channel's address, oldest first, with the channel's events. */
export async function channelHistory(ledger: SettlementLedger, channel: PublicKey): Promise<ChannelHistory> {
  const signatures: string[] = [];
  let before: string | undefined;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const batch = await ledger.connection.getSignaturesForAddress(
      channel,
      { limit: PAGE, ...(before === undefined ? {} : { before }) },
      COMMITMENT,
    );
    for (const entry of batch) if (entry.err === null) signatures.push(entry.signature);
    if (batch.length < PAGE) break;
    if (page === MAX_PAGES - 1) throw new Error(`channel ${channel.toBase58()} has more than ${PAGE * MAX_PAGES} transactions`);
    before = batch[batch.length - 1]!.signature;
  }
  const settlements: ChainSettlement[] = [];
  let closed: ChainClose | null = null;
  for (const signature of signatures.reverse()) {
    const found = await transactionEvents(ledger, channel, signature);
    if (found === null) throw new Error(`transaction ${signature} of channel ${channel.toBase58()} is not readable yet`);
    settlements.push(...found.settlements);
    closed = found.closed ?? closed;
  }
  return { settlements, closed };
}

/** The channel's events in one transaction; null when the transaction is not (yet) on chain. */
export async function transactionEvents(
  ledger: SettlementLedger,
  channel: PublicKey,
  signature: string,
): Promise<{ settlements: ChainSettlement[]; closed: ChainClose | null } | null> {
  const tx = await ledger.connection.getTransaction(signature, { commitment: COMMITMENT, maxSupportedTransactionVersion: 0 });
  if (tx === null) return null;
  const events = decodeTransactionEvents(tx, ledger.programId);
  const settlements: ChainSettlement[] = [];
  let closed: ChainClose | null = null;
  for (const event of eventsNamed(events, "ChannelSettled")) {
    if (!event.channel.equals(channel)) continue;
    settlements.push({
      signature,
      slot: tx.slot,
      fromSequence: event.sequence - BigInt(event.chargeCount) + 1n,
      toSequence: event.sequence,
      cumulativeUnits: event.cumulativeUnits,
    });
  }
  for (const event of eventsNamed(events, "ChannelClosed")) {
    if (!event.channel.equals(channel)) continue;
    closed = {
      signature,
      slot: tx.slot,
      settledUnits: event.settledUnits,
      refundedUnits: event.refundedUnits,
      sequence: event.sequence,
      forced: event.forced,
    };
  }
  return { settlements, closed };
}
