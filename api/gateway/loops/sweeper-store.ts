/**
 * The sweeper's scans (sweeper.ts): what the pay path left open, each read together with the
 * settlement row that witnesses its outcome. Only the sweeper imports this module.
 *
 * Why one file and not the owning stores: every scan joins tables of different owners in one
 * statement — a claim table (`x402_nonces`: api/gateway/x402/nonces.ts; `mpp_payments`:
 * api/gateway/mpp/store.ts) with `settlements` (store.ts), and the reservation scan
 * `spend_reservations` (api/gateway/reservations/store.ts) with both. Split across the owners they would
 * become several reads that could see different moments; api/shared may not know the gateway's
 * claim tables at all. So the scans stay single statements here, and they only read: every write
 * the sweeper makes is a conditional UPDATE in the store that owns the row.
 */
import type { Db } from "../../../indexer/db/database.js";

export type SettlementStatus = "pending" | "confirmed" | "failed";

/** An open x402 claim with its settlement row, if any. */
export interface X402ClaimRow {
  payer: string;
  nonce: string;
  tx_hash: string | null;
  claimed_at: Date;
  signature: string | null;
  s_status: SettlementStatus | null;
  s_error: string | null;
}

/**
 * Open x402 claims that have a transaction, a settlement row (a facilitator whose last writes
 * failed left the claim without its transaction) or are older than `claimCutoff`, oldest first,
 * with the settlement row by the claim's transaction, else by the payment's reference.
 */
export async function x402ClaimsToSweep(db: Db, claimCutoff: Date, batch: number): Promise<X402ClaimRow[]> {
  const { rows } = await db.query<X402ClaimRow>(
    `SELECT n.payer, n.nonce, n.tx_hash, n.claimed_at, s.signature, s.status AS s_status, s.error AS s_error
     FROM x402_nonces n
     LEFT JOIN settlements s ON s.signature = coalesce(n.tx_hash,
       (SELECT r.signature FROM settlements r WHERE r.payment_ref = 'x402:' || n.payer || ':' || n.nonce))
     WHERE n.status = 'claimed' AND (n.tx_hash IS NOT NULL OR s.signature IS NOT NULL OR n.claimed_at < $1)
     ORDER BY n.claimed_at LIMIT $2`,
    [claimCutoff, batch],
  );
  return rows;
}

/** An open MPP claim with its settlement row, if any. */
export interface MppClaimRow {
  id: string;
  kind: "submission" | "session_charge";
  payer: string;
  nonce: string | null;
  rail: "stablecoin" | "card";
  status: "claimed" | "authorized";
  tx_hash: string | null;
  created_at: Date;
  signature: string | null;
  s_status: SettlementStatus | null;
  s_error: string | null;
  /** A settlement row without a reference exists that could be this payment's. */
  ambiguous: boolean;
}

/**
 * Open MPP claims (`claimed`, `authorized`) that have a transaction, a settlement row or are older
 * than `claimCutoff`, oldest first, with the settlement row by transaction, else by reference.
 */
export async function mppClaimsToSweep(db: Db, claimCutoff: Date, batch: number): Promise<MppClaimRow[]> {
  const { rows } = await db.query<MppClaimRow>(
    `SELECT p.id, p.kind, p.payer, p.nonce, p.rail, p.status, p.tx_hash, p.created_at,
            s.signature, s.status AS s_status, s.error AS s_error,
            EXISTS (SELECT 1 FROM settlements c WHERE c.agent_id = p.agent_id AND c.payee = p.payee AND c.amount_units = p.amount_units
                      AND c.protocol = 'mpp' AND c.payment_ref IS NULL AND c.created_at >= p.created_at) AS ambiguous
     FROM mpp_payments p
     LEFT JOIN settlements s ON s.signature = coalesce(p.tx_hash,
       (SELECT r.signature FROM settlements r WHERE r.payment_ref =
          CASE WHEN p.kind = 'submission' THEN 'mpp:' || p.payer || ':' || p.nonce ELSE 'mpp-charge:' || p.id END))
     WHERE p.status IN ('claimed', 'authorized') AND (p.tx_hash IS NOT NULL OR s.signature IS NOT NULL OR p.created_at < $1)
     ORDER BY p.created_at LIMIT $2`,
    [claimCutoff, batch],
  );
  return rows;
}

/** The claim-table join of each kind of payment reference. */
const CLAIM_JOINS = {
  x402: {
    like: "x402:%",
    join: `LEFT JOIN x402_nonces c ON c.payer = split_part(r.payment_ref, ':', 2) AND c.nonce = split_part(r.payment_ref, ':', 3)`,
    exists: "c.payer IS NOT NULL",
  },
  mpp: {
    like: "mpp:%",
    join: `LEFT JOIN mpp_payments c ON c.payer = split_part(r.payment_ref, ':', 2) AND c.nonce = split_part(r.payment_ref, ':', 3)`,
    exists: "c.id IS NOT NULL",
  },
  "mpp-charge": {
    like: "mpp-charge:%",
    join: `LEFT JOIN mpp_payments c ON c.kind = 'session_charge' AND c.id =
      CASE WHEN split_part(r.payment_ref, ':', 2) ~ '^[0-9]{1,18}$' THEN split_part(r.payment_ref, ':', 2)::bigint END`,
    exists: "c.id IS NOT NULL",
  },
} as const;

export type PaymentRefKind = keyof typeof CLAIM_JOINS;

/** The kinds of payment reference, in the order the sweeper scans them. */
export const PAYMENT_REF_KINDS: readonly PaymentRefKind[] = ["x402", "mpp", "mpp-charge"];

/** An open linked reservation with its claim's and its settlement's state. */
export interface LinkedReservationRow {
  payment_ref: string;
  claim_status: string | null;
  claim_tx: string | null;
  signature: string | null;
  s_status: SettlementStatus | null;
}

/**
 * Reservations still `reserved` whose payment reference is of `kind` and whose outcome is known:
 * the settlement or the claim finished, or no claim and no settlement exist and the signed payment
 * expired before `expiryCutoff`. Oldest first.
 */
export async function linkedReservationsToSweep(
  db: Db,
  kind: PaymentRefKind,
  expiryCutoff: Date,
  batch: number,
): Promise<LinkedReservationRow[]> {
  const claim = CLAIM_JOINS[kind];
  const { rows } = await db.query<LinkedReservationRow>(
    `SELECT r.payment_ref, c.status AS claim_status, c.tx_hash AS claim_tx, s.signature, s.status AS s_status
     FROM spend_reservations r
     ${claim.join}
     LEFT JOIN settlements s ON s.payment_ref = r.payment_ref
     WHERE r.status = 'reserved' AND r.payment_ref LIKE '${claim.like}'
       AND (s.status IN ('confirmed', 'failed') OR c.status IN ('settled', 'failed')
            OR (s.signature IS NULL AND NOT (${claim.exists}) AND r.expires_at < $1))
     ORDER BY r.id LIMIT $2`,
    [expiryCutoff, batch],
  );
  return rows;
}
