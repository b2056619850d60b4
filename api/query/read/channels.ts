/**
 * Payment channels as an account sees them: the chain's view (`channels`, `channel_settlements`,
 * `channel_payments`: the indexer's projection) joined with the gateway's (`channel_sessions`,
 * `channel_charges`: vouchers signed and accepted, which the chain learns of only when settled).
 *
 * | value | authority |
 * |---|---|
 * | deposit, settled, refunded, status, open/close transactions | the chain (the gateway's row until the indexer has the opening) |
 * | signed and accepted cumulative, a charge not settled yet | the gateway |
 * | a charge settled: its settlement transaction and payment row | the chain (the gateway's settlement_tx until indexed) |
 *
 * Scope: a channel is visible to an account when its payer is one of the account's agents (the
 * gateway's session by agent, the chain's channel by the agent's wallet), like every listing.
 */
import type pg from "pg";

export type ChannelStatus = "opening" | "open" | "closing" | "closed" | "failed";
export type ChargeStatus = "signed" | "accepted" | "settled" | "void";

export interface ChannelRow {
  readonly address: string;
  /** The paying agent's public id (api/shared/agent-ids.ts). */
  readonly agent_id: string;
  readonly payer: string;
  readonly payee: string;
  readonly mint: string;
  readonly channel_id: string;
  readonly protocol: "x402" | "mpp";
  readonly service_origin: string | null;
  readonly invocation: string | null;
  readonly parent_tx_hash: string | null;
  readonly status: ChannelStatus;
  readonly on_chain: boolean;
  readonly deposit_units: string;
  readonly signed_units: string;
  readonly signed_sequence: string;
  readonly accepted_units: string;
  readonly accepted_sequence: string;
  readonly settled_units: string;
  readonly settled_sequence: string;
  readonly refunded_units: string | null;
  readonly forced: boolean;
  readonly settlement_count: number;
  readonly open_tx: string | null;
  readonly opened_at: Date;
  readonly expires_at: Date;
  readonly withdraw_delay_seconds: number;
  readonly close_requested_at: Date | null;
  readonly refundable_at: Date | null;
  readonly close_tx: string | null;
  readonly closed_at: Date | null;
  readonly time_micros: string;
}

export interface ChannelFilter {
  readonly accountId: string;
  /** The agent's internal key (`agents.agent_id`). */
  readonly agentId?: string | undefined;
  readonly status?: ChannelStatus | undefined;
  /** Keyset: channels strictly older than this (opened time in µs, address). */
  readonly after?: { readonly timeMicros: bigint; readonly address: string } | undefined;
  readonly limit: number;
}

/**
 * The addresses of the account's channels (`$1` account, `agentWhere` on `a`), each once: the
 * gateway's sessions by agent, the chain's channels by payer wallet.
 */
const visible = (agentWhere: string): string => `
  SELECT s.channel AS address, a.public_id AS agent_id FROM agents a JOIN channel_sessions s ON s.agent_id = a.agent_id
  WHERE ${agentWhere}
  UNION
  SELECT c.address, a.public_id FROM agents a JOIN channels c ON c.payer = a.wallet_address
  WHERE ${agentWhere}`;

const COLUMNS = `
  v.address, v.agent_id, coalesce(c.payer, s.payer) AS payer, coalesce(c.payee, s.payee) AS payee,
  coalesce(c.mint, s.mint) AS mint, coalesce(c.channel_id, s.channel_id) AS channel_id,
  coalesce(c.protocol, s.protocol) AS protocol, s.service_origin, c.invocation, s.parent_tx_hash,
  CASE WHEN c.address IS NOT NULL THEN c.status ELSE s.status END AS status,
  c.address IS NOT NULL AS on_chain,
  coalesce(c.deposit_units, s.deposit)::text AS deposit_units,
  greatest(coalesce(s.signed_cumulative, 0), coalesce(c.settled_units, 0))::text AS signed_units,
  greatest(coalesce(s.signed_sequence, 0), coalesce(c.sequence, 0))::text AS signed_sequence,
  greatest(coalesce(s.accepted_cumulative, 0), coalesce(c.settled_units, 0))::text AS accepted_units,
  greatest(coalesce(s.accepted_sequence, 0), coalesce(c.sequence, 0))::text AS accepted_sequence,
  coalesce(c.settled_units, s.settled_cumulative, 0)::text AS settled_units,
  coalesce(c.sequence, s.settled_sequence, 0)::text AS settled_sequence,
  coalesce(c.refunded_units, s.refunded)::text AS refunded_units,
  coalesce(c.forced, false) AS forced, coalesce(c.settlement_count, 0) AS settlement_count,
  coalesce(c.open_tx, s.open_tx) AS open_tx,
  coalesce(c.opened_at, s.created_at) AS opened_at,
  coalesce(c.expires_at, s.expires_at) AS expires_at,
  coalesce(c.withdraw_delay_seconds, s.withdraw_delay_seconds) AS withdraw_delay_seconds,
  c.close_requested_at, c.refundable_at,
  coalesce(c.close_tx, s.close_tx) AS close_tx, coalesce(c.closed_at, s.closed_at) AS closed_at,
  (extract(epoch FROM coalesce(c.opened_at, s.created_at)) * 1000000)::bigint::text AS time_micros`;

const JOINS = `
  LEFT JOIN channels c ON c.address = v.address
  LEFT JOIN channel_sessions s ON s.channel = v.address`;

/** One page plus one row (to tell whether another page follows), newest first. */
export async function listChannels(pool: pg.Pool, filter: ChannelFilter): Promise<ChannelRow[]> {
  const params: unknown[] = [filter.accountId];
  const param = (value: unknown): string => {
    params.push(value);
    return `$${params.length}`;
  };
  const agentWhere = ["a.account_id = $1"];
  if (filter.agentId !== undefined) agentWhere.push(`a.agent_id = ${param(filter.agentId)}`);
  const where = ["true"];
  if (filter.status !== undefined) where.push(`x.status = ${param(filter.status)}`);
  if (filter.after !== undefined) {
    where.push(
      `(x.time_micros::bigint, x.address) < (${param(filter.after.timeMicros.toString())}::bigint, ${param(filter.after.address)})`,
    );
  }
  const limit = param(filter.limit + 1);
  const { rows } = await pool.query<ChannelRow>(
    `SELECT * FROM (SELECT ${COLUMNS} FROM (${visible(agentWhere.join(" AND "))}) v ${JOINS}) x
     WHERE ${where.join(" AND ")}
     ORDER BY x.time_micros::bigint DESC, x.address DESC LIMIT ${limit}`,
    params,
  );
  return rows;
}

/** Channels by address, null for one the account does not see. */
export async function channelsByAddresses(pool: pg.Pool, accountId: string, addresses: readonly string[]): Promise<(ChannelRow | null)[]> {
  const { rows } = await pool.query<ChannelRow>(
    `SELECT ${COLUMNS} FROM (${visible("a.account_id = $1")}) v ${JOINS} WHERE v.address = ANY($2::text[])`,
    [accountId, [...addresses]],
  );
  const byAddress = new Map(rows.map((row) => [row.address, row]));
  return addresses.map((address) => byAddress.get(address) ?? null);
}

/**
 * The channel each payment was settled from, by the payment's event (`channel_payments.event_id`),
 * for Transaction.channel; null for a payment no settlement carried. Keyed by event, not by
 * transaction: one transaction may settle several channels, of several agents or accounts.
 */
export async function channelAddressesByPaymentEvent(pool: pg.Pool, eventIds: readonly string[]): Promise<(string | null)[]> {
  const { rows } = await pool.query<{ event_id: string; channel: string }>(
    "SELECT event_id::text, channel FROM channel_payments WHERE event_id = ANY($1::bigint[])",
    [[...eventIds]],
  );
  const byEvent = new Map(rows.map((row) => [row.event_id, row.channel]));
  return eventIds.map((id) => byEvent.get(id) ?? null);
}

export interface SettlementRow {
  readonly tx_hash: string;
  readonly settler: string;
  readonly cumulative_units: string;
  readonly delta_units: string;
  readonly sequence: string;
  readonly charge_count: number;
  readonly slot: string;
  readonly block_time: Date | null;
  /** confirmed | finalized: the commitment of its charges' payment rows. */
  readonly status: string;
}

/** The channel's settlements on chain, newest first (index `channel_settlements (channel, sequence)`). */
export async function listSettlements(pool: pg.Pool, channel: string, limit: number): Promise<SettlementRow[]> {
  const { rows } = await pool.query<SettlementRow>(
    `SELECT s.tx_hash, s.settler, s.cumulative_units::text, s.delta_units::text, s.sequence::text, s.charge_count,
            s.slot::text, s.block_time,
            CASE WHEN bool_and(t.status = 'finalized') THEN 'finalized' ELSE 'confirmed' END AS status
     FROM channel_settlements s
     LEFT JOIN channel_payments p ON p.settlement_tx = s.tx_hash AND p.settlement_instruction_index = s.instruction_index
     LEFT JOIN transactions t ON t.event_id = p.event_id
     WHERE s.channel = $1
     GROUP BY s.tx_hash, s.instruction_index
     ORDER BY s.sequence DESC LIMIT $2`,
    [channel, limit],
  );
  return rows;
}

export interface ChargeRow {
  readonly payment_id: string;
  /** Null for a charge the chain recorded that the gateway has no row of. */
  readonly sequence: string | null;
  readonly amount_units: string;
  readonly cumulative_units: string | null;
  readonly endpoint: string;
  readonly status: ChargeStatus;
  readonly settlement_tx: string | null;
  /** The payment row's commitment once the indexer has it; null before (never "confirmed" early). */
  readonly chain_status: "confirmed" | "finalized" | null;
  readonly explorer_url: string | null;
  readonly signed_at: Date | null;
  readonly accepted_at: Date | null;
  readonly settled_at: Date | null;
}

const BIGINT_MAX = 2n ** 63n - 1n;

/**
 * The channel's charges, newest first, keyset on the payment id (ids increase within a channel).
 * The page's ids come from both sides by index (`channel_charges (channel, payment_id)`,
 * `channel_payments (channel, payment_id)`), so a page costs its size, not the channel's history.
 * A charge the chain settled is `settled` whatever the gateway's row says; one the gateway marked
 * settled before the indexer saw it keeps the gateway's settlement transaction and no chain status.
 */
export async function listCharges(pool: pg.Pool, channel: string, limit: number, afterPaymentId?: bigint): Promise<ChargeRow[]> {
  const after = afterPaymentId ?? 2n ** 64n;
  const { rows } = await pool.query<ChargeRow>(
    `WITH page AS (
       SELECT payment_id FROM (
         (SELECT payment_id::numeric AS payment_id FROM channel_charges
          WHERE channel = $1 AND payment_id <= $3::bigint ORDER BY payment_id DESC LIMIT $2)
         UNION
         (SELECT payment_id FROM channel_payments
          WHERE channel = $1 AND payment_id < $4::numeric ORDER BY payment_id DESC LIMIT $2)) ids
       ORDER BY payment_id DESC LIMIT $2)
     SELECT page.payment_id::text AS payment_id, g.sequence::text,
            coalesce(g.amount, t.amount_units)::text AS amount_units, g.cumulative::text AS cumulative_units,
            coalesce(g.endpoint, e.endpoint, t.endpoint_hash) AS endpoint,
            CASE WHEN p.event_id IS NOT NULL THEN 'settled' ELSE g.status END AS status,
            coalesce(p.settlement_tx, g.settlement_tx) AS settlement_tx,
            t.status AS chain_status, t.explorer_url,
            g.created_at AS signed_at, g.accepted_at, coalesce(g.settled_at, t."timestamp") AS settled_at
     FROM page
     LEFT JOIN channel_charges g ON g.channel = $1
       AND g.payment_id = CASE WHEN page.payment_id <= $3::bigint THEN page.payment_id::bigint END
     LEFT JOIN channel_payments p ON p.channel = $1 AND p.payment_id = page.payment_id
     LEFT JOIN transactions t ON t.event_id = p.event_id
     LEFT JOIN endpoints e ON e.endpoint_hash = t.endpoint_hash
     ORDER BY page.payment_id DESC`,
    // $3: the gateway's ids are bigint; the chain's (u64) may exceed it.
    [channel, limit + 1, (after - 1n > BIGINT_MAX ? BIGINT_MAX : after - 1n).toString(), after.toString()],
  );
  return rows;
}
