/**
 * The row shapes the read functions return: Postgres values as `pg` gives them (numeric and int8
 * as strings), turned into API values by the resolvers. One shape per concept.
 */

/** A listed payment: a chain transaction, or a payment the gateway rejected. */
export interface PaymentRow {
  /** 0 = recorded on the chain, 1 = rejected by the gateway. */
  readonly kind: 0 | 1;
  /** chain: transactions.event_id; rejection: payment_rejections.id. */
  readonly id: string;
  readonly tx_hash: string | null;
  /** The agent's public id (api/shared/agent-ids.ts), not its internal key. */
  readonly agent_id: string;
  readonly wallet_address: string;
  readonly payee: string | null;
  readonly protocol: string | null;
  readonly rail: string | null;
  readonly amount_units: string;
  readonly endpoint: string;
  readonly endpoint_hash: string | null;
  readonly domain: string | null;
  readonly policy_check: string;
  readonly parent_tx_hash: string | null;
  readonly explorer_url: string | null;
  readonly timestamp: Date;
  readonly time_micros: string;
  /** confirmed | finalized | rejected. */
  readonly status: string;
  readonly depth: number;
  readonly settlement_status: string | null;
  readonly reason_code: string | null;
  readonly reason: string | null;
  /** The policy version the payment or refusal was decided under; null when it predates versions or bypassed the gateway. */
  readonly policy_version: number | null;
}

export interface AgentRow {
  /** The internal key other tables reference; never shown (api/shared/agent-ids.ts). */
  readonly agent_id: string;
  /** The id callers see and send, unique within the account. */
  readonly public_id: string;
  readonly account_id: string;
  readonly name: string;
  readonly wallet_address: string;
  readonly created_at: Date;
  /** Set when the agent was archived (migration 016); its history stays readable. */
  readonly archived_at: Date | null;
}
