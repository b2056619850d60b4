/**
 * Payments received: the on-chain records whose payee is the wallet of one of the account's agents,
 * whoever paid, newest first. The payers of the standard x402 / MPP clients are wallets the gateway
 * does not hold (their records are authority-attested and reference the transfer the indexer
 * verified, `settlement_status`), so they appear here and not in `transactions`, which lists
 * what the account's agents paid.
 */
import type pg from "pg";

export interface ReceivedRow {
  readonly tx_hash: string;
  readonly payer: string;
  readonly payee_agent_id: string;
  readonly payee: string;
  readonly protocol: "x402" | "mpp";
  readonly rail: string;
  readonly amount_units: string;
  readonly endpoint: string;
  readonly domain: string | null;
  readonly settlement_reference: string | null;
  readonly settlement_status: string | null;
  readonly explorer_url: string | null;
  readonly timestamp: Date;
  readonly status: "confirmed" | "finalized";
}

/** At most `limit` rows; per agent the index `transactions (payee, timestamp)` is read backwards. */
export async function listReceivedPayments(
  pool: pg.Pool,
  filter: { readonly accountId: string; readonly agentId?: string | undefined; readonly limit: number },
): Promise<ReceivedRow[]> {
  const params: unknown[] = [filter.accountId, filter.limit];
  const agentWhere = ["a.account_id = $1"];
  if (filter.agentId !== undefined) {
    params.push(filter.agentId);
    agentWhere.push(`a.agent_id = $${params.length}`);
  }
  const { rows } = await pool.query<ReceivedRow>(
    `SELECT t.tx_hash, t.agent AS payer, a.public_id AS payee_agent_id, t.payee, t.protocol, t.rail,
            t.amount_units::text AS amount_units, coalesce(e.endpoint, t.endpoint_hash) AS endpoint, e.domain,
            t.settlement_reference, t.settlement_status, t.explorer_url, t."timestamp", t.status
     FROM agents a
     CROSS JOIN LATERAL (
       SELECT * FROM transactions t WHERE t.payee = a.wallet_address ORDER BY t."timestamp" DESC, t.event_id DESC LIMIT $2) t
     LEFT JOIN endpoints e ON e.endpoint_hash = t.endpoint_hash
     WHERE ${agentWhere.join(" AND ")}
     ORDER BY t."timestamp" DESC, t.event_id DESC LIMIT $2`,
    params,
  );
  return rows;
}
