/**
 * Custodial agent wallets (spec 2.4, 4 `wallet.*`): one ed25519 keypair per agent, sealed at rest
 * by the keystore; the address and the balance are the chain's. Funding comes from the account's
 * funding source; a withdrawal is an SPL Token TransferChecked signed by the agent's key, with the
 * service authority paying the fee (agent wallets hold no SOL).
 *
 * Every fund/withdraw is a `wallet_operations` row written before anything is sent. A caller's
 * `clientReference` is stored with it, so a retried call is recognised and answered with the
 * first call's result instead of moving money twice.
 */
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from "@solana/spl-token";
import { Keypair, type PublicKey, Transaction } from "@solana/web3.js";
import type pg from "pg";
import {
  IdempotencyConflictError,
  InsufficientFundsError,
  InvalidAddressError,
  InvalidClientReferenceError,
  InvalidAmountUnitsError,
  PaymentError,
  PaymentPendingError,
  WalletExistsError,
  WalletKeyError,
  WalletNotFoundError,
} from "./errors.js";
import type { FundingSource } from "./funding-source.js";
import type { Keystore } from "./keystore.js";
import {
  COMMITMENT,
  lookUpOutcomes,
  parseAddress,
  type SettlementLedger,
  signTransaction,
  submit,
  tokenBalanceUnits,
} from "./ledger.js";

const U64_MAX = (1n << 64n) - 1n;
const RECONCILE_BATCH = 100;
const CLIENT_REFERENCE_SHAPE = /^[A-Za-z0-9_:.-]{1,128}$/;

export interface NewAgentWallet {
  readonly accountId: string;
  /**
   * The internal key (api/agent-ids.ts): `internalAgentId(accountId, publicId)` for a new agent;
   * the sealed key is bound to it. The public id is derived from it (`agents.public_id`).
   */
  readonly agentId: string;
  readonly name?: string;
}

export interface AgentWalletRow {
  readonly agentId: string;
  readonly address: string;
}

/**
 * Creates the agent (the `agents` row api/keys.ts `registerAgent` writes, with the new wallet's
 * address) and its sealed keypair in one transaction: there is never an agent without a key or a
 * key without an agent.
 */
export async function createAgentWallet(pool: pg.Pool, keystore: Keystore, agent: NewAgentWallet): Promise<AgentWalletRow> {
  const keypair = Keypair.generate();
  const address = keypair.publicKey.toBase58();
  const sealed = keystore.seal(keypair, { agentId: agent.agentId, address });
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("INSERT INTO agents (agent_id, account_id, name, wallet_address) VALUES ($1, $2, $3, $4)", [
      agent.agentId,
      agent.accountId,
      agent.name ?? "",
      address,
    ]);
    await client.query(
      "INSERT INTO agent_wallets (agent_id, address, ciphertext, nonce, key_version) VALUES ($1, $2, $3, $4, $5)",
      [agent.agentId, address, sealed.ciphertext, sealed.nonce, sealed.keyVersion],
    );
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    if ((error as { code?: string }).code === "23505") throw new WalletExistsError(agent.agentId);
    throw error;
  } finally {
    client.release();
  }
  return { agentId: agent.agentId, address };
}

/**
 * Key rotation: re-seals up to `limit` wallets sealed under a retired key version with the
 * current one (each row conditional on the version it read, so a concurrent rotation cannot lose
 * a key). A row that does not open is reported, not fatal. Run until `resealed` is 0; then the
 * retired key can leave configuration (once `unreadable` rows are dealt with).
 */
export async function resealStaleWalletKeys(
  pool: pg.Pool,
  keystore: Keystore,
  limit = 500,
): Promise<{ resealed: number; unreadable: string[] }> {
  const rows = await pool.query<{ agent_id: string; address: string; ciphertext: Buffer; nonce: Buffer; key_version: string }>(
    `SELECT agent_id, address, ciphertext, nonce, key_version FROM agent_wallets
     WHERE key_version <> $1 ORDER BY agent_id LIMIT $2`,
    [keystore.currentVersion, limit],
  );
  let resealed = 0;
  const unreadable: string[] = [];
  for (const row of rows.rows) {
    const owner = { agentId: row.agent_id, address: row.address };
    let keypair: Keypair;
    try {
      keypair = keystore.open({ ciphertext: row.ciphertext, nonce: row.nonce, keyVersion: row.key_version }, owner);
    } catch (error) {
      if (!(error instanceof WalletKeyError)) throw error;
      unreadable.push(row.agent_id);
      continue;
    }
    const sealed = keystore.seal(keypair, owner);
    const updated = await pool.query(
      "UPDATE agent_wallets SET ciphertext = $2, nonce = $3, key_version = $4 WHERE agent_id = $1 AND key_version = $5",
      [row.agent_id, sealed.ciphertext, sealed.nonce, sealed.keyVersion, row.key_version],
    );
    resealed += updated.rowCount ?? 0;
  }
  return { resealed, unreadable };
}

export function checkAmountUnits(units: bigint): void {
  if (units <= 0n) throw new InvalidAmountUnitsError(units, "must be positive");
  if (units > U64_MAX) throw new InvalidAmountUnitsError(units, "must fit in a u64");
}

function checkClientReference(reference: string | undefined): void {
  if (reference !== undefined && !CLIENT_REFERENCE_SHAPE.test(reference)) {
    throw new InvalidClientReferenceError(reference);
  }
}

export interface OperationOptions {
  /** The caller's idempotency reference (1-128 of `[A-Za-z0-9_:.-]`). */
  readonly clientReference?: string;
}

export interface WalletOperationResult {
  readonly operationId: string;
  /** The transaction signature; null only for a funding whose source has not answered. */
  readonly txHash: string | null;
  readonly status: "pending" | "confirmed" | "failed";
  /** True when this answers a retried call: nothing new was sent. */
  readonly replayed: boolean;
}

interface OperationRow {
  id: string;
  kind: string;
  amount_units: string;
  to_address: string;
  signature: string | null;
  status: "pending" | "confirmed" | "failed";
}

export interface AgentWalletsDeps {
  readonly pool: pg.Pool;
  readonly keystore: Keystore;
  readonly ledger: SettlementLedger;
  /** One source for every account, or the account's linked source (spec 4 `wallet.fund`). */
  readonly fundingSource: FundingSource | ((accountId: string) => Promise<FundingSource>);
}

export class AgentWallets {
  constructor(private readonly deps: AgentWalletsDeps) {}

  get ledger(): SettlementLedger {
    return this.deps.ledger;
  }

  async address(agentId: string): Promise<PublicKey> {
    const rows = await this.deps.pool.query<{ address: string }>("SELECT address FROM agent_wallets WHERE agent_id = $1", [
      agentId,
    ]);
    const row = rows.rows[0];
    if (row === undefined) throw new WalletNotFoundError(agentId);
    return parseAddress(row.address, "wallet address");
  }

  /** The agent whose wallet has this address (the protocol layer's AgentDirectory), or null. */
  async agentIdForAddress(address: string): Promise<string | null> {
    const rows = await this.deps.pool.query<{ agent_id: string }>("SELECT agent_id FROM agent_wallets WHERE address = $1", [
      address,
    ]);
    return rows.rows[0]?.agent_id ?? null;
  }

  /** The agent's decrypted keypair, for a signer inside the gateway; never returned to callers. */
  async keypair(agentId: string): Promise<Keypair> {
    const rows = await this.deps.pool.query<{ address: string; ciphertext: Buffer; nonce: Buffer; key_version: string }>(
      "SELECT address, ciphertext, nonce, key_version FROM agent_wallets WHERE agent_id = $1",
      [agentId],
    );
    const row = rows.rows[0];
    if (row === undefined) throw new WalletNotFoundError(agentId);
    return this.deps.keystore.open(
      { ciphertext: row.ciphertext, nonce: row.nonce, keyVersion: row.key_version },
      { agentId, address: row.address },
    );
  }

  /** Settlement-mint balance of the agent's wallet, from the chain (`confirmed`). */
  async balance(agentId: string): Promise<bigint> {
    return tokenBalanceUnits(this.deps.ledger, await this.address(agentId));
  }

  /** Spec 2.4 Wallet, with the balance in base units. */
  async wallet(agentId: string): Promise<{ agentId: string; address: string; balanceUnits: bigint; network: string }> {
    const address = await this.address(agentId);
    const balanceUnits = await tokenBalanceUnits(this.deps.ledger, address);
    return { agentId, address: address.toBase58(), balanceUnits, network: this.deps.ledger.network };
  }

  /** Tops the wallet up from the funding source. */
  async fund(agentId: string, units: bigint, options: OperationOptions = {}): Promise<WalletOperationResult> {
    checkAmountUnits(units);
    checkClientReference(options.clientReference);
    const address = await this.address(agentId);
    const replay = await this.#replay(agentId, "fund", units, address.toBase58(), options.clientReference);
    if (replay !== null) return replay;
    const inserted = await this.deps.pool.query<{ id: string }>(
      `INSERT INTO wallet_operations (agent_id, kind, amount_units, to_address, client_reference, status)
       VALUES ($1, 'fund', $2, $3, $4, 'pending')
       ON CONFLICT (agent_id, client_reference) DO NOTHING RETURNING id`,
      [agentId, units.toString(), address.toBase58(), options.clientReference ?? null],
    );
    const id = inserted.rows[0]?.id;
    if (id === undefined) {
      // A concurrent call with the same reference won the insert: answer with its operation.
      return (await this.#replay(agentId, "fund", units, address.toBase58(), options.clientReference))!;
    }
    try {
      const { txHash } = await (await this.#fundingSourceOf(agentId)).fund(address, units);
      await this.#finish(id, "confirmed", null, txHash);
      return { operationId: id, txHash, status: "confirmed", replayed: false };
    } catch (error) {
      if (error instanceof PaymentPendingError) {
        await this.#finish(id, "pending", null, error.signature);
      } else {
        await this.#finish(id, "failed", (error as Error).message, (error as PaymentError).detail?.signature ?? null);
      }
      throw error;
    }
  }

  /**
   * Sends `units` to `to` (a wallet owner address; its associated token account is created if
   * missing, rent paid by the service). More than the balance is an InsufficientFundsError with
   * the balance, and nothing is sent.
   */
  async withdraw(agentId: string, to: string, units: bigint, options: OperationOptions = {}): Promise<WalletOperationResult> {
    checkAmountUnits(units);
    checkClientReference(options.clientReference);
    const destination = parseAddress(to, "withdrawal address");
    const keypair = await this.keypair(agentId);
    if (destination.equals(keypair.publicKey)) throw new InvalidAddressError(to, "is the wallet itself");
    const replay = await this.#replay(agentId, "withdraw", units, destination.toBase58(), options.clientReference);
    if (replay !== null) return replay;

    const balanceUnits = await tokenBalanceUnits(this.deps.ledger, keypair.publicKey);
    if (units > balanceUnits) throw new InsufficientFundsError(agentId, units, balanceUnits);

    const { connection, mint, decimals, authority } = this.deps.ledger;
    const source = getAssociatedTokenAddressSync(mint, keypair.publicKey, true);
    const target = getAssociatedTokenAddressSync(mint, destination, true);
    const transaction = new Transaction().add(
      createAssociatedTokenAccountIdempotentInstruction(authority.publicKey, target, destination, mint),
      createTransferCheckedInstruction(source, mint, target, keypair.publicKey, units, decimals),
    );
    const signed = signTransaction(this.deps.ledger, transaction, await connection.getLatestBlockhash(COMMITMENT), [keypair]);
    const inserted = await this.deps.pool.query<{ id: string }>(
      `INSERT INTO wallet_operations
         (agent_id, kind, amount_units, to_address, client_reference, signature, last_valid_block_height, status)
       VALUES ($1, 'withdraw', $2, $3, $4, $5, $6, 'pending')
       ON CONFLICT (agent_id, client_reference) DO NOTHING RETURNING id`,
      [
        agentId,
        units.toString(),
        destination.toBase58(),
        options.clientReference ?? null,
        signed.signature,
        signed.lastValidBlockHeight,
      ],
    );
    const id = inserted.rows[0]?.id;
    if (id === undefined) {
      // A concurrent call with the same reference won the insert: answer with its operation.
      return (await this.#replay(agentId, "withdraw", units, destination.toBase58(), options.clientReference))!;
    }

    const result = await submit(this.deps.ledger, signed);
    if (result.status === "confirmed") {
      // The withdrawal happened even if this write fails; reconcilePendingOperations marks it later.
      await this.#finish(id, "confirmed", null, signed.signature, result.slot).catch(() => undefined);
      return { operationId: id, txHash: signed.signature, status: "confirmed", replayed: false };
    }
    if (result.status === "pending") throw new PaymentPendingError(signed.signature);
    const reason = result.status === "rejected" ? (result.error as Error).message : result.reason;
    await this.#finish(id, "failed", reason, signed.signature);
    // A concurrent payment may have spent the funds between the check and the send.
    const nowUnits = await tokenBalanceUnits(this.deps.ledger, keypair.publicKey);
    if (units > nowUnits) throw new InsufficientFundsError(agentId, units, nowUnits);
    throw new PaymentError(`withdrawal failed: ${reason}`, { signature: signed.signature });
  }

  /** Resolves pending withdrawals (and fundings with a known signature) from the chain. */
  async reconcilePendingOperations(): Promise<{ confirmed: number; failed: number; pending: number }> {
    const rows = await this.deps.pool.query<{ id: string; signature: string; last_valid_block_height: string }>(
      `SELECT id, signature, last_valid_block_height FROM wallet_operations
       WHERE status = 'pending' AND signature IS NOT NULL AND last_valid_block_height IS NOT NULL
       ORDER BY created_at LIMIT ${RECONCILE_BATCH}`,
    );
    const outcomes = await lookUpOutcomes(
      this.deps.ledger,
      rows.rows.map((row) => ({ signature: row.signature, lastValidBlockHeight: Number(row.last_valid_block_height) })),
    );
    const counts = { confirmed: 0, failed: 0, pending: 0 };
    for (const [i, outcome] of outcomes.entries()) {
      const row = rows.rows[i]!;
      counts[outcome.status] += 1;
      if (outcome.status === "confirmed") await this.#finish(row.id, "confirmed", null, row.signature, outcome.slot);
      if (outcome.status === "failed") await this.#finish(row.id, "failed", outcome.reason, row.signature);
    }
    return counts;
  }

  async #fundingSourceOf(agentId: string): Promise<FundingSource> {
    const { fundingSource } = this.deps;
    if (typeof fundingSource !== "function") return fundingSource;
    const rows = await this.deps.pool.query<{ account_id: string }>("SELECT account_id FROM agents WHERE agent_id = $1", [
      agentId,
    ]);
    const accountId = rows.rows[0]?.account_id;
    if (accountId === undefined) throw new WalletNotFoundError(agentId);
    return fundingSource(accountId);
  }

  async #replay(
    agentId: string,
    kind: "fund" | "withdraw",
    units: bigint,
    toAddress: string,
    clientReference: string | undefined,
  ): Promise<WalletOperationResult | null> {
    if (clientReference === undefined) return null;
    const rows = await this.deps.pool.query<OperationRow>(
      `SELECT id, kind, amount_units, to_address, signature, status FROM wallet_operations
       WHERE agent_id = $1 AND client_reference = $2`,
      [agentId, clientReference],
    );
    const row = rows.rows[0];
    if (row === undefined) return null;
    if (row.kind !== kind || BigInt(row.amount_units) !== units || row.to_address !== toAddress) {
      throw new IdempotencyConflictError(clientReference);
    }
    return { operationId: row.id, txHash: row.signature, status: row.status, replayed: true };
  }

  async #finish(
    id: string,
    status: "pending" | "confirmed" | "failed",
    error: string | null,
    signature: string | null,
    slot?: number,
  ): Promise<void> {
    await this.deps.pool.query(
      `UPDATE wallet_operations SET status = $2, error = $3, signature = coalesce($4, signature), slot = $5, updated_at = now()
       WHERE id = $1`,
      [id, status, error, signature, slot ?? null],
    );
  }
}
