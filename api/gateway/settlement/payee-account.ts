/**
 * A new agent's token account, opened when the agent is created: the service authority pays the
 * rent (as it does for a payee's account created by a settlement), so the agent can be paid at
 * once by any client, including an official x402 client whose transfer needs the payee's
 * associated token account to exist. Counted against the same per-account quota of payee token
 * accounts in any 24 hours (./payee.ts rule 3): beyond it nothing is opened, and the agent's
 * account is created by its first funding or settlement as before.
 *
 * The quota slot is taken (a row of agent_token_accounts) under the account's quota lock before
 * the transaction is sent; a transaction that failed frees it again, one whose outcome is unknown
 * keeps it (it may have landed).
 */
import { createAssociatedTokenAccountIdempotentInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { PublicKey, Transaction } from "@solana/web3.js";
import type pg from "pg";
import type { Logger } from "pino";
import { withTransaction } from "../../../indexer/db/database.js";
import { recentBlockhash, type SettlementLedger, signTransaction, submit } from "../chain/ledger.js";
import { DEFAULT_PAYEE_ACCOUNT_QUOTA } from "../chain/payee.js";
import { lockPayeeAccountQuota, payeeAccountsCreatedToday } from "./store.js";

export interface AgentTokenAccountsDeps {
  readonly pool: pg.Pool;
  readonly ledger: SettlementLedger;
  /** New payee token accounts per account in any 24 hours; `DEFAULT_PAYEE_ACCOUNT_QUOTA` when absent. */
  readonly payeeAccountQuota?: number;
  readonly logger?: Logger;
}

export type TokenAccountOpening =
  /** The account exists now (opened here, or already there). */
  | { readonly status: "open"; readonly address: string; readonly created: boolean }
  /** The account's quota of new token accounts is used up: nothing was sent. */
  | { readonly status: "quota"; readonly address: string }
  /** The transaction failed, or its outcome is not known yet. */
  | { readonly status: "failed" | "pending"; readonly address: string };

export class AgentTokenAccounts {
  constructor(private readonly deps: AgentTokenAccountsDeps) {}

  /** Opens the token account of `agentId`'s wallet (the internal agent id) if it has none. */
  async open(agentId: string): Promise<TokenAccountOpening> {
    const { pool, ledger } = this.deps;
    const { rows } = await pool.query<{ wallet_address: string; account_id: string }>(
      "SELECT wallet_address, account_id FROM agents WHERE agent_id = $1",
      [agentId],
    );
    const agent = rows[0];
    if (agent === undefined) throw new Error(`no agent ${agentId}`);
    const owner = new PublicKey(agent.wallet_address);
    const address = getAssociatedTokenAddressSync(ledger.mint, owner, true);
    if ((await ledger.connection.getAccountInfo(address)) !== null) return { status: "open", address: address.toBase58(), created: false };

    const quota = this.deps.payeeAccountQuota ?? DEFAULT_PAYEE_ACCOUNT_QUOTA;
    const claimed = await withTransaction(pool, async (client) => {
      await lockPayeeAccountQuota(client, agentId);
      if ((await payeeAccountsCreatedToday(client, agentId)) >= quota) return "quota";
      const inserted = await client.query(
        "INSERT INTO agent_token_accounts (agent_id, account_id, address) VALUES ($1, $2, $3) ON CONFLICT (agent_id) DO NOTHING",
        [agentId, agent.account_id, address.toBase58()],
      );
      // Another call is opening it already (a retried registration).
      return inserted.rowCount === 1 ? "claimed" : "pending";
    });
    if (claimed !== "claimed") return { status: claimed, address: address.toBase58() };

    const transaction = new Transaction().add(
      createAssociatedTokenAccountIdempotentInstruction(ledger.authority.publicKey, address, owner, ledger.mint),
    );
    const signed = signTransaction(ledger, transaction, await recentBlockhash(ledger), []);
    await pool.query("UPDATE agent_token_accounts SET signature = $2 WHERE agent_id = $1", [agentId, signed.signature]);
    const outcome = await submit(ledger, signed);
    if (outcome.status === "confirmed") return { status: "open", address: address.toBase58(), created: true };
    if (outcome.status === "pending") return { status: "pending", address: address.toBase58() };
    // Nothing was created: the quota slot is free again.
    await pool.query("DELETE FROM agent_token_accounts WHERE agent_id = $1", [agentId]);
    this.deps.logger?.warn({ agentId, outcome: outcome.status }, "opening a new agent's token account failed");
    return { status: "failed", address: address.toBase58() };
  }
}
