/**
 * The ladder's store (bench/http/ladder.ts): `payments` payments of `agents` agents spread over
 * `accounts` accounts, written set-based (INSERT … SELECT generate_series) straight into the
 * tables the listing reads, in seconds where the indexer's ingest takes minutes. Answers the
 * first account's id (agent k is in account k % accounts; payment i is paid by agent i % agents).
 */
import type pg from "pg";
import { createAccount } from "../../api/shared/keys.js";

export interface StoreSize {
  readonly payments: number;
  readonly agents: number;
  readonly accounts: number;
}

export async function seedPayments(pool: pg.Pool, size: StoreSize): Promise<string> {
  const { payments: PAYMENTS, agents: AGENTS, accounts: ACCOUNTS } = size;
  const accountIds: string[] = [];
  for (let a = 0; a < ACCOUNTS; a += 1) accountIds.push(await createAccount(pool, `bench account ${a}`));
  // Agent k belongs to account k % ACCOUNTS; payment i is paid by agent i % AGENTS.
  await pool.query(
    `INSERT INTO agents (agent_id, account_id, name, wallet_address)
     SELECT 'bench-agent-' || k, ($1::uuid[])[k % $2 + 1], 'agent ' || k, 'bench-wallet-' || k FROM generate_series(0, $3 - 1) k`,
    [accountIds, ACCOUNTS, AGENTS],
  );
  await pool.query(
    `INSERT INTO endpoints (endpoint_hash, endpoint, domain)
     SELECT md5('endpoint ' || e), 'api' || e || '.example.com/v1/data', 'api' || e || '.example.com' FROM generate_series(0, 7) e`,
  );
  // 50 payments a second from 2026-01-01, alternating protocols, over 8 endpoints.
  await pool.query(
    `INSERT INTO transactions (event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol, rail,
                               amount_units, endpoint_hash, atomic, explorer_url, "timestamp", slot, status)
     SELECT i + 1, encode(sha256(int8send(i)), 'hex'), 0, 'bench-wallet-' || (i % $2), 'bench-payee', 'bench-mint', i,
            CASE WHEN i % 2 = 0 THEN 'x402' ELSE 'mpp' END, 'stablecoin', 1000 + i % 997, md5('endpoint ' || (i % 8)), false,
            'https://explorer.example/tx/' || i, timestamptz '2026-01-01T00:00:00Z' + i * interval '20 milliseconds', i / 50,
            'finalized'
     FROM generate_series(0, $1 - 1) i`,
    [PAYMENTS, AGENTS],
  );
  // A store autovacuum has visited (visibility map set, statistics), as a running one would be.
  await pool.query("VACUUM ANALYZE accounts, agents, endpoints, transactions");
  return accountIds[0]!;
}
