/** Query.channels, Query.channel and the Channel type's lazy fields (settlements, charges). */
import bs58 from "bs58";
import type { ApiContext } from "../context.js";
import { type ChannelRow, type ChannelStatus, listChannels, listCharges, listSettlements } from "../read/channels.js";
import { badInput } from "../../shared/errors.js";
import { formatUsdcFixed } from "../../shared/money.js";
import { parseIntInRange } from "../../shared/validation.js";
import { requireAgent } from "./common.js";

export const CHANNELS_FIRST_DEFAULT = 20;
export const CHANNELS_FIRST_MAX = 100;
export const CHARGES_FIRST_DEFAULT = 50;
export const CHARGES_FIRST_MAX = 200;
export const SETTLEMENTS_FIRST_DEFAULT = 20;
export const SETTLEMENTS_FIRST_MAX = 100;

/** A channel address: base58 of a 32-byte key. */
export function parseChannelAddress(argument: string, value: string): string {
  let bytes: Uint8Array;
  try {
    bytes = bs58.decode(value);
  } catch {
    throw badInput(argument, "not a base58 channel address");
  }
  if (bytes.length !== 32) throw badInput(argument, `a channel address is 32 bytes, got ${bytes.length}`);
  return value;
}

export function encodeChannelCursor(timeMicros: string, address: string): string {
  return Buffer.from(`${timeMicros}:${address}`, "utf8").toString("base64url");
}

export function parseChannelCursor(argument: string, value: string): { timeMicros: bigint; address: string } {
  const match = /^(-?\d{1,20}):([1-9A-HJ-NP-Za-km-z]{32,44})$/.exec(Buffer.from(value, "base64url").toString("utf8"));
  if (match === null) throw badInput(argument, "not a cursor this service issued");
  return { timeMicros: BigInt(match[1]!), address: match[2]! };
}

function parseChargeCursor(argument: string, value: string): bigint {
  const match = /^charge:(\d{1,20})$/.exec(Buffer.from(value, "base64url").toString("utf8"));
  if (match === null) throw badInput(argument, "not a cursor this service issued");
  return BigInt(match[1]!);
}

const money = (units: string): string => formatUsdcFixed(BigInt(units));
const iso = (date: Date | null): string | null => (date === null ? null : date.toISOString());

export interface ChannelObject {
  readonly address: string;
  readonly agentId: string;
  readonly payer: string;
  readonly payee: string;
  readonly mint: string;
  readonly channelId: string;
  readonly protocol: string;
  readonly serviceOrigin: string | null;
  readonly invocation: string | null;
  readonly parentTxHash: string | null;
  readonly status: ChannelStatus;
  readonly onChain: boolean;
  readonly expired: boolean;
  readonly deposit: string;
  readonly depositUnits: string;
  readonly signed: string;
  readonly signedUnits: string;
  readonly signedSequence: string;
  readonly accepted: string;
  readonly acceptedUnits: string;
  readonly acceptedSequence: string;
  readonly settled: string;
  readonly settledUnits: string;
  readonly settledSequence: string;
  readonly acceptedUnsettled: string;
  readonly acceptedUnsettledUnits: string;
  readonly refunded: string | null;
  readonly refundedUnits: string | null;
  readonly forced: boolean;
  readonly settlementCount: number;
  readonly openTx: string | null;
  readonly openedAt: string;
  readonly expiresAt: string;
  readonly withdrawDelaySeconds: number;
  readonly closeRequestedAt: string | null;
  readonly refundableAt: string | null;
  readonly closeTx: string | null;
  readonly closedAt: string | null;
}

export function toChannel(row: ChannelRow, now: Date): ChannelObject {
  const unsettled = BigInt(row.accepted_units) - BigInt(row.settled_units);
  return {
    address: row.address,
    agentId: row.agent_id,
    payer: row.payer,
    payee: row.payee,
    mint: row.mint,
    channelId: row.channel_id,
    protocol: row.protocol,
    serviceOrigin: row.service_origin,
    invocation: row.invocation,
    parentTxHash: row.parent_tx_hash,
    status: row.status,
    onChain: row.on_chain,
    expired: row.status !== "closed" && row.status !== "failed" && row.expires_at.getTime() <= now.getTime(),
    deposit: money(row.deposit_units),
    depositUnits: row.deposit_units,
    signed: money(row.signed_units),
    signedUnits: row.signed_units,
    signedSequence: row.signed_sequence,
    accepted: money(row.accepted_units),
    acceptedUnits: row.accepted_units,
    acceptedSequence: row.accepted_sequence,
    settled: money(row.settled_units),
    settledUnits: row.settled_units,
    settledSequence: row.settled_sequence,
    acceptedUnsettled: formatUsdcFixed(unsettled > 0n ? unsettled : 0n),
    acceptedUnsettledUnits: (unsettled > 0n ? unsettled : 0n).toString(),
    refunded: row.refunded_units === null ? null : money(row.refunded_units),
    refundedUnits: row.refunded_units,
    forced: row.forced,
    settlementCount: row.settlement_count,
    openTx: row.open_tx,
    openedAt: row.opened_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
    withdrawDelaySeconds: row.withdraw_delay_seconds,
    closeRequestedAt: iso(row.close_requested_at),
    refundableAt: iso(row.refundable_at),
    closeTx: row.close_tx,
    closedAt: iso(row.closed_at),
  };
}

interface ChannelsArgs {
  agentId?: string | null;
  status?: ChannelStatus | null;
  first?: number | null;
  after?: string | null;
}

export async function channels(
  _: unknown,
  args: ChannelsArgs,
  context: ApiContext,
): Promise<{ nodes: ChannelObject[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } }> {
  const limit = parseIntInRange("first", args.first, CHANNELS_FIRST_DEFAULT, 1, CHANNELS_FIRST_MAX);
  const agentId =
    args.agentId === null || args.agentId === undefined ? undefined : (await requireAgent(context, "agentId", args.agentId)).agent_id;
  const rows = await listChannels(context.deps.pool, {
    accountId: context.caller.accountId,
    agentId,
    status: args.status ?? undefined,
    after: args.after === null || args.after === undefined ? undefined : parseChannelCursor("after", args.after),
    limit,
  });
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    nodes: page.map((row) => toChannel(row, context.now)),
    pageInfo: {
      hasNextPage: rows.length > limit,
      endCursor: last === undefined ? null : encodeChannelCursor(last.time_micros, last.address),
    },
  };
}

export async function channel(_: unknown, args: { address: string }, context: ApiContext): Promise<ChannelObject | null> {
  const row = await context.loaders.channelByAddress.load(parseChannelAddress("address", args.address));
  return row === null ? null : toChannel(row, context.now);
}

/** Transaction.channel: the channel this payment was settled from, when the account sees it. */
export async function transactionChannel(
  parent: { eventId: string | null },
  _args: unknown,
  context: ApiContext,
): Promise<ChannelObject | null> {
  if (parent.eventId === null) return null;
  const address = await context.loaders.channelAddressByPaymentEvent.load(parent.eventId);
  if (address === null) return null;
  const row = await context.loaders.channelByAddress.load(address);
  return row === null ? null : toChannel(row, context.now);
}

async function settlements(parent: ChannelObject, args: { first?: number | null }, context: ApiContext) {
  const limit = parseIntInRange("first", args.first, SETTLEMENTS_FIRST_DEFAULT, 1, SETTLEMENTS_FIRST_MAX);
  const rows = await listSettlements(context.deps.pool, parent.address, limit);
  return rows.map((row) => ({
    txHash: row.tx_hash,
    settler: row.settler,
    cumulative: money(row.cumulative_units),
    cumulativeUnits: row.cumulative_units,
    delta: money(row.delta_units),
    deltaUnits: row.delta_units,
    sequence: row.sequence,
    chargeCount: row.charge_count,
    slot: row.slot,
    timestamp: iso(row.block_time),
    status: row.status,
  }));
}

async function charges(parent: ChannelObject, args: { first?: number | null; after?: string | null }, context: ApiContext) {
  const limit = parseIntInRange("first", args.first, CHARGES_FIRST_DEFAULT, 1, CHARGES_FIRST_MAX);
  const after = args.after === null || args.after === undefined ? undefined : parseChargeCursor("after", args.after);
  const rows = await listCharges(context.deps.pool, parent.address, limit, after);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    nodes: page.map((row) => ({
      paymentId: row.payment_id,
      sequence: row.sequence,
      amount: money(row.amount_units),
      amountUnits: row.amount_units,
      cumulative: row.cumulative_units === null ? null : money(row.cumulative_units),
      cumulativeUnits: row.cumulative_units,
      endpoint: row.endpoint,
      status: row.status,
      settlementTx: row.settlement_tx,
      chainStatus: row.chain_status,
      solanaExplorer: row.explorer_url,
      signedAt: iso(row.signed_at),
      acceptedAt: iso(row.accepted_at),
      settledAt: iso(row.settled_at),
    })),
    pageInfo: {
      hasNextPage: rows.length > limit,
      endCursor: last === undefined ? null : Buffer.from(`charge:${last.payment_id}`, "utf8").toString("base64url"),
    },
  };
}

export const Channel = { settlements, charges };
