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
  isGatewayError,
  InsufficientFundsError,
  InvalidAddressError,
  InvalidClientReferenceError,
  PaymentError,
  PaymentPendingError,
  WalletExistsError,
  WalletKeyError,
  WalletNotFoundError,
} from "../chain/errors.js";
import { withTransaction } from "../../../indexer/db/database.js";
import { payeeRefusal } from "../chain/payee.js";
import type { CheckedKeypair } from "../chain/signer.js";
import type { FundingSource } from "./funding-source.js";
import type { Keystore } from "./keystore.js";
import {
  lookUpOutcomes,
  type Outcome,
  checkAmountUnits,
  parseAddress,
  recentBlockhash,
  type SettlementLedger,
  signTransaction,
  submit,
  type WalletTokenAccount,
  walletOperationMemo,
  walletTokenAccounts,
  heldBalanceUnits,
} from "../chain/ledger.js";

const RECONCILE_BATCH = 100;
/** Other token accounts a withdrawal empties into the associated one at most (a transaction's size). */
export const MAX_SWEPT_ACCOUNTS = 6;
const CLIENT_REFERENCE_SHAPE = /^[A-Za-z0-9_:.-]{1,128}$/;

export interface NewAgentWallet {
  readonly accountId: string;
  /**
   * The internal key (api/shared/agent-ids.ts): `internalAgentId(accountId, publicId)` for a new agent;
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
 * Creates the agent (the `agents` row api/shared/keys.ts `registerAgent` writes, with the new wallet's
 * address) and its sealed keypair in one transaction: there is never an agent without a key or a
 * key without an agent.
 */
export async function createAgentWallet(pool: pg.Pool, keystore: Keystore, agent: NewAgentWallet): Promise<AgentWalletRow> {
  const keypair = Keypair.generate();
  const address = keypair.publicKey.toBase58();
  const sealed = keystore.seal(keypair, { agentId: agent.agentId, address });
  try {
    await withTransaction(pool, async (client) => {
      await client.query("INSERT INTO agents (agent_id, account_id, name, wallet_address) VALUES ($1, $2, $3, $4)", [
        agent.agentId,
        agent.accountId,
        agent.name ?? "",
        address,
      ]);
      await client.query("INSERT INTO agent_wallets (agent_id, address, ciphertext, nonce, key_version) VALUES ($1, $2, $3, $4, $5)", [
        agent.agentId,
        address,
        sealed.ciphertext,
        sealed.nonce,
        sealed.keyVersion,
      ]);
    });
  } catch (error) {
    if ((error as { code?: string }).code === "23505") throw new WalletExistsError(agent.agentId);
    throw error;
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

export type OperationStatus = "pending" | "confirmed" | "failed";

/** A wallet operation as stored, for reads (`AgentWallets.operation`). */
export interface WalletOperationRecord {
  readonly operationId: string;
  readonly kind: "fund" | "withdraw";
  readonly amountUnits: bigint;
  /** The withdrawal's destination; the agent's own address for a funding. */
  readonly toAddress: string;
  readonly txHash: string | null;
  readonly status: OperationStatus;
  /** Why a failed operation failed (an RPC refusal, a program error, `expired`). */
  readonly error: string | null;
}

interface OperationRow {
  id: string;
  kind: string;
  amount_units: string;
  to_address: string;
  signature: string | null;
  last_valid_block_height: string | null;
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
    const rows = await this.deps.pool.query<{ address: string }>("SELECT address FROM agent_wallets WHERE agent_id = $1", [agentId]);
    const row = rows.rows[0];
    if (row === undefined) throw new WalletNotFoundError(agentId);
    return parseAddress(row.address, "wallet address");
  }

  /** The agent whose wallet has this address (the protocol layer's AgentDirectory), or null. */
  async agentIdForAddress(address: string): Promise<string | null> {
    const rows = await this.deps.pool.query<{ agent_id: string }>("SELECT agent_id FROM agent_wallets WHERE address = $1", [address]);
    return rows.rows[0]?.agent_id ?? null;
  }

  /**
   * The agent's decrypted keypair, for a signer inside the gateway; never returned to callers.
   * It carries its checked private key (`keypairSigner` uses it as it is).
   */
  async keypair(agentId: string): Promise<Keypair & CheckedKeypair> {
    // Named (prepared once per connection): read for every payment the agent signs.
    const rows = await this.deps.pool.query<{ address: string; ciphertext: Buffer; nonce: Buffer; key_version: string }>({
      name: "agent-wallet-key",
      text: "SELECT address, ciphertext, nonce, key_version FROM agent_wallets WHERE agent_id = $1",
      values: [agentId],
    });
    const row = rows.rows[0];
    if (row === undefined) throw new WalletNotFoundError(agentId);
    return this.deps.keystore.open(
      { ciphertext: row.ciphertext, nonce: row.nonce, keyVersion: row.key_version },
      { agentId, address: row.address },
    );
  }

  /**
   * Settlement-mint balance of the agent's wallet, from the chain (`confirmed`): every token
   * account of the mint it owns, not only the associated one, so tokens sent to another account
   * of the wallet are counted (and a withdrawal can move them).
   */
  async balance(agentId: string): Promise<bigint> {
    return heldBalanceUnits(this.deps.ledger, await this.address(agentId));
  }

  /** Spec 2.4 Wallet, with the balance in base units (as `balance`). */
  async wallet(agentId: string): Promise<{ agentId: string; address: string; balanceUnits: bigint; network: string }> {
    const address = await this.address(agentId);
    const balanceUnits = await heldBalanceUnits(this.deps.ledger, address);
    return { agentId, address: address.toBase58(), balanceUnits, network: this.deps.ledger.network };
  }

  /**
   * Tops the wallet up from the funding source. The row is written first; its id goes into the
   * transaction (so identical fundings never share one) and the signature is stored before the
   * source sends it. The answer is `confirmed`, `pending` (sent, outcome not known yet: the
   * reconciler or a retry with the same reference resolves it by signature), or a thrown
   * PaymentError when the source says nothing moved.
   */
  async fund(agentId: string, units: bigint, options: OperationOptions = {}): Promise<WalletOperationResult> {
    checkAmountUnits(units);
    checkClientReference(options.clientReference);
    const address = await this.address(agentId);
    const replay = await this.#replay(agentId, "fund", units, address.toBase58(), options.clientReference);
    if (replay !== null) return replay;
    const source = await this.#fundingSourceOf(agentId);
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
    let signature: string | null = null;
    const recordSigned = async (signed: { signature: string; lastValidBlockHeight: number }): Promise<void> => {
      await this.deps.pool.query(
        "UPDATE wallet_operations SET signature = $2, last_valid_block_height = $3, updated_at = now() WHERE id = $1",
        [id, signed.signature, signed.lastValidBlockHeight],
      );
      signature = signed.signature;
    };
    let txHash: string;
    try {
      ({ txHash } = await source.fund(address, units, { operationId: id, recordSigned }));
    } catch (error) {
      if (error instanceof PaymentPendingError) {
        // Sent, outcome unknown: never a failure. The row stays pending under its signature.
        await this.#setSignature(id, error.signature).catch(() => undefined);
        return { operationId: id, txHash: error.signature, status: "pending", replayed: false };
      }
      if (isGatewayError(error)) {
        // The source's definite answer: nothing moved.
        await this.#finish(id, "failed", error.message, (error as PaymentError).detail?.signature ?? signature);
        throw error;
      }
      // Anything else (a network or database error mid-call) is an unknown outcome, never a
      // failure: with a recorded signature it is pending like a timeout; without one the row stays
      // pending for an operator (the source may have paid) and the error is the answer.
      if (signature !== null) return { operationId: id, txHash: signature, status: "pending", replayed: false };
      throw error;
    }
    // The funding happened even if this write fails; the reconciler marks it from the signature.
    await this.#finish(id, "confirmed", null, txHash).catch(() => undefined);
    return { operationId: id, txHash, status: "confirmed", replayed: false };
  }

  /**
   * Sends `units` to `to` (a wallet owner address; its associated token account is created if
   * missing, rent paid by the service). More than the balance is an InsufficientFundsError with
   * the balance, and nothing is sent. The operation id is allocated first and carried in the
   * transaction (a memo), so two identical withdrawals are two transactions; the row is stored
   * with the signature before the transaction is sent. An outcome not known yet is `pending`.
   */
  async withdraw(agentId: string, to: string, units: bigint, options: OperationOptions = {}): Promise<WalletOperationResult> {
    checkAmountUnits(units);
    checkClientReference(options.clientReference);
    const destination = parseAddress(to, "withdrawal address");
    // A payee's static rule, less the curve: never the mint, a program or a sysvar, where the
    // withdrawn tokens could never move again; an off-curve owner (a multisig vault) is the
    // account holder's own choice and stays allowed.
    const unsafe = payeeRefusal(destination.toBase58(), [this.deps.ledger.mint], "to");
    if (unsafe !== null && unsafe.reason !== "payee_off_curve") throw new InvalidAddressError(to, unsafe.message);
    const keypair = await this.keypair(agentId);
    if (destination.equals(keypair.publicKey)) throw new InvalidAddressError(to, "is the wallet itself");
    const replay = await this.#replay(agentId, "withdraw", units, destination.toBase58(), options.clientReference);
    if (replay !== null) return replay;

    // What the withdrawal can move: the associated account, topped up from the wallet's other
    // accounts of the mint (largest first) when it alone does not hold enough.
    const held = await walletTokenAccounts(this.deps.ledger, keypair.publicKey);
    const sweep = sweepFor(held, units);
    const spendable = spendableUnits(held, sweep);
    if (units > spendable) throw new InsufficientFundsError(agentId, units, spendable);

    // The id before the row: it is signed into the transaction, and the row is written once, with
    // the signature (an id lost to a crash or a reference conflict is a harmless gap).
    const allocated = await this.deps.pool.query<{ id: string }>(
      "SELECT nextval(pg_get_serial_sequence('wallet_operations', 'id'))::text AS id",
    );
    const id = allocated.rows[0]!.id;
    const transaction = withdrawalTransaction(this.deps.ledger, keypair.publicKey, destination, units, id, sweep);
    const signed = signTransaction(this.deps.ledger, transaction, await recentBlockhash(this.deps.ledger), [keypair]);
    const inserted = await this.deps.pool.query<{ id: string }>(
      `INSERT INTO wallet_operations
         (id, agent_id, kind, amount_units, to_address, client_reference, signature, last_valid_block_height, status)
       VALUES ($1, $2, 'withdraw', $3, $4, $5, $6, $7, 'pending')
       ON CONFLICT (agent_id, client_reference) DO NOTHING RETURNING id`,
      [
        id,
        agentId,
        units.toString(),
        destination.toBase58(),
        options.clientReference ?? null,
        signed.signature,
        signed.lastValidBlockHeight,
      ],
    );
    if (inserted.rows[0] === undefined) {
      // A concurrent call with the same reference won the insert: answer with its operation.
      return (await this.#replay(agentId, "withdraw", units, destination.toBase58(), options.clientReference))!;
    }

    const result = await submit(this.deps.ledger, signed);
    if (result.status === "confirmed") {
      // The withdrawal happened even if this write fails; reconcilePendingOperations marks it later.
      await this.#finish(id, "confirmed", null, signed.signature, result.slot).catch(() => undefined);
      return { operationId: id, txHash: signed.signature, status: "confirmed", replayed: false };
    }
    // Sent, outcome unknown: the row stays pending under its signature; never a failure.
    if (result.status === "pending") return { operationId: id, txHash: signed.signature, status: "pending", replayed: false };
    const reason = result.status === "rejected" ? (result.error as Error).message : result.reason;
    await this.#finish(id, "failed", reason, signed.signature);
    // A concurrent payment may have spent the funds between the check and the send.
    const nowUnits = await heldBalanceUnits(this.deps.ledger, keypair.publicKey);
    if (units > nowUnits) throw new InsufficientFundsError(agentId, units, nowUnits);
    throw new PaymentError(`withdrawal failed: ${reason}`, { signature: signed.signature });
  }

  /** Resolves pending withdrawals and fundings with a known signature from the chain. */
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
      await this.#settle(row.id, row.signature, outcome);
    }
    return counts;
  }

  async #fundingSourceOf(agentId: string): Promise<FundingSource> {
    const { fundingSource } = this.deps;
    if (typeof fundingSource !== "function") return fundingSource;
    const rows = await this.deps.pool.query<{ account_id: string }>("SELECT account_id FROM agents WHERE agent_id = $1", [agentId]);
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
      `SELECT id, kind, amount_units, to_address, signature, last_valid_block_height, status FROM wallet_operations
       WHERE agent_id = $1 AND client_reference = $2`,
      [agentId, clientReference],
    );
    const row = rows.rows[0];
    if (row === undefined) return null;
    if (row.kind !== kind || BigInt(row.amount_units) !== units || row.to_address !== toAddress) {
      throw new IdempotencyConflictError(clientReference);
    }
    return { operationId: row.id, txHash: row.signature, status: (await this.#current(row)).status, replayed: true };
  }

  /**
   * One operation of the agent (null when it has none with this id), for a caller that was
   * answered `pending` without a key: a pending one is looked up on the chain first, as a retry
   * would.
   */
  async operation(agentId: string, operationId: string): Promise<WalletOperationRecord | null> {
    if (!/^[1-9][0-9]{0,18}$/.test(operationId)) return null;
    const rows = await this.deps.pool.query<OperationRow & { error: string | null }>(
      `SELECT id, kind, amount_units, to_address, signature, last_valid_block_height, status, error FROM wallet_operations
       WHERE id = $1 AND agent_id = $2`,
      [operationId, agentId],
    );
    const row = rows.rows[0];
    if (row === undefined) return null;
    const { status, error } = await this.#current(row);
    return {
      operationId: row.id,
      kind: row.kind as "fund" | "withdraw",
      amountUnits: BigInt(row.amount_units),
      toAddress: row.to_address,
      txHash: row.signature,
      status,
      error,
    };
  }

  /** The row's status (and error), a pending one with a signature asked of the chain (and written) first. */
  async #current(row: OperationRow & { error?: string | null }): Promise<{ status: OperationStatus; error: string | null }> {
    const stored = { status: row.status, error: row.error ?? null };
    if (row.status !== "pending" || row.signature === null || row.last_valid_block_height === null) return stored;
    // An RPC error leaves it pending: unknown is never failed.
    const [outcome] = await lookUpOutcomes(this.deps.ledger, [
      { signature: row.signature, lastValidBlockHeight: Number(row.last_valid_block_height) },
    ]).catch(() => [{ status: "pending" } as const]);
    return (await this.#settle(row.id, row.signature, outcome!)) ?? stored;
  }

  /** Writes a looked-up outcome; returns the row's status and error after it (null if the row is gone). */
  async #settle(id: string, signature: string, outcome: Outcome): Promise<{ status: OperationStatus; error: string | null } | null> {
    if (outcome.status === "confirmed") await this.#finish(id, "confirmed", null, signature, outcome.slot);
    if (outcome.status === "failed") await this.#finish(id, "failed", outcome.reason, signature);
    const rows = await this.deps.pool.query<{ status: OperationStatus; error: string | null }>(
      "SELECT status, error FROM wallet_operations WHERE id = $1",
      [id],
    );
    return rows.rows[0] ?? null;
  }

  async #setSignature(id: string, signature: string): Promise<void> {
    await this.deps.pool.query(
      "UPDATE wallet_operations SET signature = coalesce(signature, $2), updated_at = now() WHERE id = $1 AND status = 'pending'",
      [id, signature],
    );
  }

  /**
   * Pending → final, once. Only a pending row moves: the request that sent it, a retry and the
   * reconciler may all resolve the same operation, and they read the same chain.
   */
  async #finish(id: string, status: "confirmed" | "failed", error: string | null, signature: string | null, slot?: number): Promise<void> {
    await this.deps.pool.query(
      `UPDATE wallet_operations SET status = $2, error = $3, signature = coalesce(signature, $4), slot = $5, updated_at = now()
       WHERE id = $1 AND status = 'pending'`,
      [id, status, error, signature, slot ?? null],
    );
  }
}

/** The agent's TransferChecked to `destination`'s token account (created if missing, rent paid by the service), tagged with the operation. */
export function withdrawalTransaction(
  ledger: SettlementLedger,
  owner: PublicKey,
  destination: PublicKey,
  units: bigint,
  operationId: string,
  sweep: readonly WalletTokenAccount[] = [],
): Transaction {
  const { mint, decimals, authority } = ledger;
  const source = getAssociatedTokenAddressSync(mint, owner, true);
  const target = getAssociatedTokenAddressSync(mint, destination, true);
  const transaction = new Transaction();
  if (sweep.length > 0) transaction.add(createAssociatedTokenAccountIdempotentInstruction(authority.publicKey, source, owner, mint));
  for (const account of sweep) {
    transaction.add(createTransferCheckedInstruction(account.address, mint, source, owner, account.units, decimals));
  }
  return transaction.add(
    createAssociatedTokenAccountIdempotentInstruction(authority.publicKey, target, destination, mint),
    createTransferCheckedInstruction(source, mint, target, owner, units, decimals),
    walletOperationMemo(operationId),
  );
}

/**
 * The wallet's other token accounts a withdrawal of `units` empties into its associated one
 * first: none when the associated account holds enough, else the largest, up to
 * `MAX_SWEPT_ACCOUNTS`, until the sum covers `units`.
 */
export function sweepFor(held: readonly WalletTokenAccount[], units: bigint): WalletTokenAccount[] {
  let covered = held.find((account) => account.associated)?.units ?? 0n;
  const sweep: WalletTokenAccount[] = [];
  const others = held
    .filter((account) => !account.associated && account.units > 0n)
    .sort((a, b) => (a.units > b.units ? -1 : a.units < b.units ? 1 : 0));
  for (const account of others) {
    if (covered >= units || sweep.length >= MAX_SWEPT_ACCOUNTS) break;
    sweep.push(account);
    covered += account.units;
  }
  return sweep;
}

/** What a withdrawal sweeping `sweep` can send: the associated account's units plus the swept. */
function spendableUnits(held: readonly WalletTokenAccount[], sweep: readonly WalletTokenAccount[]): bigint {
  const associated = held.find((account) => account.associated)?.units ?? 0n;
  return sweep.reduce((sum, account) => sum + account.units, associated);
}
