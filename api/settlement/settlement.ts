/**
 * Settlement: the one call every protocol (x402, MPP) and rail uses to put a payment on the
 * ledger. One `record_payment` per payment, co-signed by the service authority; on the
 * stablecoin rail without a settlement reference the program itself moves the tokens in the same
 * instruction (atomic transfer + record); card/other rails and third-party settlements are
 * recorded without a transfer.
 *
 * Crash safety (a crash at any point loses or duplicates nothing):
 *   1. checks that need the chain (balance, invocation budget; read together with a shared
 *      recent blockhash) — nothing written yet;
 *   2. one Postgres transaction: allocate the agent's next payment id, store the endpoint text by
 *      hash, build and sign the transaction locally (its signature is now known), insert the
 *      `settlements` row as `pending` with signature, signed bytes and last valid block height;
 *   3. send; 4. mark `confirmed` (with slot) or `failed`.
 * A crash before 2 commits leaves nothing; after, a pending row whose signature
 * `reconcilePending` looks up: found → confirmed/failed, absent after its blockhash expired →
 * failed (it can never land, and nothing moved). Ids are never reused, so a retry is a new id:
 * the program's replay window refuses the same id twice, and a pending row is never re-signed.
 */
import { BorshCoder } from "@coral-xyz/anchor";
import { createAssociatedTokenAccountIdempotentInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { type PublicKey, Transaction, type TransactionInstruction } from "@solana/web3.js";
import bs58 from "bs58";
import type pg from "pg";
import {
  associatedTransferAccounts,
  endpointHash,
  endpointText,
  invocationPda,
  openInvocationInstruction,
  PAYMENT_LEDGER_IDL,
  PAYMENT_LEDGER_PROGRAM_ID,
  type Protocol,
  PROTOCOLS,
  type Rail,
  RAILS,
  recordPaymentInstruction,
  SIGNATURE_BYTES,
} from "../../programs/payment_ledger/ts/index.js";
import { publicAgentId } from "../agent-ids.js";
import { endpointHost } from "../policy/domains.js";
import type { Settler } from "../x402/settler.js";
import {
  BudgetExceededError,
  InsufficientFundsError,
  InvalidAmountUnitsError,
  PaymentError,
  PaymentPendingError,
} from "../wallets/errors.js";
import {
  COMMITMENT,
  lookUpOutcomes,
  parseAddress,
  recentBlockhash,
  type SettlementLedger,
  type SignedTransaction,
  signTransaction,
  submit,
  type SubmitResult,
  tokenBalanceUnits,
} from "../wallets/ledger.js";
import { checkAmountUnits, type AgentWallets } from "../wallets/wallets.js";
import type { SettleRequest, SettleResult } from "../x402/settler.js";
import { ledgerRefusal, refusalError } from "./ledger-errors.js";
import { checkPayee, checkPayeeAccounts, DEFAULT_PAYEE_ACCOUNT_QUOTA, PayeeRefusedError } from "./payee.js";

const RECONCILE_BATCH = 256;
const SIGNATURES_PAGE = 1_000;
/** An invocation has at most this many pages of payments before its opening is given up on. */
const OPENING_LOOKUP_PAGES = 20;
const accountsCoder = new BorshCoder(PAYMENT_LEDGER_IDL);

/** The protocol layer's settle request (api/x402/settler.ts), whose reference may also be base58 text. */
export interface SettlePaymentInput extends Omit<SettleRequest, "settlementReference"> {
  /**
   * 64 bytes naming a separate settlement (base58 text or bytes): a third-party x402
   * facilitator's transaction signature, or a card processor's reference (api/card).
   */
  readonly settlementReference?: string | Uint8Array;
}

export type SettlementResult = SettleResult;

/** A settlement committed as `pending` and signed, not yet sent. */
export interface PreparedSettlement {
  readonly input: SettlePaymentInput;
  readonly paymentId: bigint;
  readonly signed: SignedTransaction;
}

export interface OpenInvocationInput {
  readonly invokerAgentId: string;
  /** Signature of the invoking transaction (the orchestrator's payment to the sub-agent). */
  readonly parentTxHash: string;
  readonly subAgentId: string;
  readonly budgetUnits: bigint;
}

export interface OpenedInvocation {
  /** The invocation PDA: pass it as `invocation` on the sub-agent's payments. */
  readonly invocation: string;
  readonly txHash: string;
  readonly slot: number;
}

export interface InvocationState {
  readonly invoker: string;
  readonly subAgent: string;
  readonly budgetUnits: bigint;
  readonly spentUnits: bigint;
}

export interface SettlementRecord {
  readonly agentId: string;
  readonly paymentId: bigint;
  readonly txHash: string;
  readonly amountUnits: bigint;
  readonly status: "pending" | "confirmed" | "failed";
  /** The program's error name, `expired`, or the RPC's refusal, for a failed one. */
  readonly error: string | null;
  readonly slot: number | null;
}

export interface ReconcileReport {
  readonly confirmed: readonly string[];
  readonly failed: readonly string[];
  readonly pending: readonly string[];
}

export interface SettlementDeps {
  readonly pool: pg.Pool;
  readonly wallets: AgentWallets;
  readonly ledger: SettlementLedger;
  /**
   * New payee token accounts the authority pays rent for, per paying account in any 24 hours
   * (api/settlement/payee.ts); `DEFAULT_PAYEE_ACCOUNT_QUOTA` when absent.
   */
  readonly payeeAccountQuota?: number;
}

interface ParsedInput {
  readonly payee: PublicKey;
  readonly endpoint: string;
  readonly domain: string;
  readonly endpointHash: Uint8Array;
  readonly settlementReference: Uint8Array | null;
  readonly invocation: PublicKey | null;
  readonly atomic: boolean;
}

function parseSignature(text: string, what: string): Uint8Array {
  let bytes: Uint8Array;
  try {
    bytes = bs58.decode(text);
  } catch {
    throw new PaymentError(`${what} is not base58`);
  }
  if (bytes.length !== SIGNATURE_BYTES) throw new PaymentError(`${what} must be a ${SIGNATURE_BYTES}-byte signature`);
  return bytes;
}

function checkedReference(bytes: Uint8Array): Uint8Array {
  if (bytes.length !== SIGNATURE_BYTES) throw new PaymentError(`settlement reference must be ${SIGNATURE_BYTES} bytes`);
  return bytes;
}

function parseInput(input: SettlePaymentInput): ParsedInput {
  checkAmountUnits(input.amountUnits);
  if (!PROTOCOLS.includes(input.protocol)) throw new PaymentError(`unknown protocol ${JSON.stringify(input.protocol)}`);
  if (!RAILS.includes(input.rail)) throw new PaymentError(`unknown rail ${JSON.stringify(input.rail)}`);
  const endpoint = endpointText(input.endpoint.trim());
  const reference = input.settlementReference;
  const settlementReference =
    reference === undefined
      ? null
      : typeof reference === "string"
        ? parseSignature(reference, "settlement reference")
        : checkedReference(reference);
  return {
    payee: parseAddress(input.payee, "payee"),
    endpoint,
    domain: endpointHost(endpoint),
    endpointHash: endpointHash(endpoint),
    settlementReference,
    invocation: input.invocation === undefined ? null : parseAddress(input.invocation, "invocation"),
    atomic: input.rail === "stablecoin" && settlementReference === null,
  };
}

/** Implements the protocol layer's `Settler` (api/x402/settler.ts) for x402 and MPP. */
export class Settlement implements Settler {
  /** Payees whose token account is known to exist: no create instruction for them. */
  readonly #payeeAccounts = new Set<string>();

  constructor(private readonly deps: SettlementDeps) {}

  /** Records (and on the atomic rail, moves) one payment; resolves once it is confirmed. */
  async settlePayment(input: SettlePaymentInput, signal?: AbortSignal): Promise<SettlementResult> {
    const prepared = await this.prepareSettlement(input);
    return this.completeSettlement(prepared, signal);
  }

  /**
   * Steps 1-2: checks, then allocates the payment id and commits the signed transaction as a
   * pending settlement. Sends nothing.
   */
  async prepareSettlement(input: SettlePaymentInput): Promise<PreparedSettlement> {
    const parsed = parseInput(input);
    const { wallets, ledger, pool } = this.deps;
    // Payee rule 1 (payee.ts): a wallet key, not the mint, a program or a PDA. Before any read.
    checkPayee(parsed.payee.toBase58(), [ledger.mint]);
    const payer = await wallets.keypair(input.agentId);
    // The chain reads are independent: made together, and the blockhash is a shared recent one
    // (api/wallets/ledger.ts `recentBlockhash`; the row keeps its last valid block height).
    const [balanceUnits, invocation, blockhash, payeeCheck] = await Promise.all([
      parsed.atomic ? tokenBalanceUnits(ledger, payer.publicKey) : null,
      parsed.invocation === null ? null : this.invocationState(parsed.invocation),
      recentBlockhash(ledger),
      // Rule 2, when tokens move to a payee not yet known to be creditable.
      parsed.atomic && !this.#payeeAccounts.has(parsed.payee.toBase58()) ? this.#payeeAccountsCheck(parsed.payee) : null,
    ]);
    const createPayeeAccount = payeeCheck?.createTokenAccount ?? false;
    if (balanceUnits !== null && input.amountUnits > balanceUnits) {
      throw new InsufficientFundsError(input.agentId, input.amountUnits, balanceUnits);
    }
    if (parsed.invocation !== null) {
      const state = invocation;
      if (state === null) throw new PaymentError(`invocation ${parsed.invocation.toBase58()} does not exist`);
      if (state.subAgent !== payer.publicKey.toBase58()) {
        throw new PaymentError(`invocation ${parsed.invocation.toBase58()} belongs to another sub-agent`, {
          ledgerError: "InvocationPayerMismatch",
        });
      }
      if (state.spentUnits + input.amountUnits > state.budgetUnits) {
        throw new BudgetExceededError(parsed.invocation.toBase58(), input.amountUnits, state.budgetUnits, state.spentUnits);
      }
    }

    // One transaction, so that an id is allocated only together with its pending row (ids stay
    // contiguous across a crash); four round trips: BEGIN, the allocation (and the endpoint row)
    // in one statement, the pending row, COMMIT. Values are always bound parameters. The allocation's row lock serializes the
    // agent's settlements for the few milliseconds of signing.
    const hashHex = Buffer.from(parsed.endpointHash).toString("hex");
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      const { rows } = await client.query<{ payment_id: string }>(
        `WITH endpoint AS (
           INSERT INTO endpoints (endpoint_hash, endpoint, domain) VALUES ($1, $2, $3) ON CONFLICT (endpoint_hash) DO NOTHING
         )
         UPDATE agent_wallets SET next_payment_id = next_payment_id + 1
         WHERE agent_id = $4 RETURNING next_payment_id - 1 AS payment_id`,
        [hashHex, parsed.endpoint, parsed.domain, input.agentId],
      );
      const row = rows[0];
      if (row === undefined) throw new PaymentError(`agent ${publicAgentId(input.agentId)} has no wallet`);
      if (createPayeeAccount) await this.#claimPayeeAccountQuota(client, input.agentId, parsed.payee.toBase58());
      const paymentId = BigInt(row.payment_id);
      const instructions = await this.#instructions(input, parsed, payer.publicKey, paymentId, createPayeeAccount);
      const signed = signTransaction(ledger, new Transaction().add(...instructions), blockhash, [payer]);
      await client.query(
        `INSERT INTO settlements (agent_id, payment_id, signature, payer, payee, amount_units, protocol, rail,
           endpoint_hash, invocation, settlement_reference, transaction, last_valid_block_height, status, payment_ref,
           payee_account_created)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'pending', $14, $15)`,
        [
          input.agentId,
          paymentId.toString(),
          signed.signature,
          payer.publicKey.toBase58(),
          parsed.payee.toBase58(),
          input.amountUnits.toString(),
          input.protocol,
          input.rail,
          hashHex,
          parsed.invocation?.toBase58() ?? null,
          parsed.settlementReference === null ? null : bs58.encode(parsed.settlementReference),
          signed.wire,
          signed.lastValidBlockHeight,
          input.paymentRef ?? null,
          createPayeeAccount,
        ],
      );
      await client.query("COMMIT");
      return { input, paymentId, signed };
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  /** Steps 3-4: sends a prepared settlement and records its outcome. */
  async completeSettlement(prepared: PreparedSettlement, signal?: AbortSignal): Promise<SettlementResult> {
    const { signed, input } = prepared;
    const result = await submit(this.deps.ledger, signed, signal);
    if (result.status === "confirmed") {
      // The chain is the truth: the payment happened even if this write fails (the reconciler
      // marks the row later), so a database error here does not turn success into an error.
      await this.#mark(signed.signature, "confirmed", null, result.slot).catch(() => undefined);
      this.#payeeAccounts.add(input.payee);
      return { txHash: signed.signature, slot: result.slot, paymentId: prepared.paymentId };
    }
    if (result.status === "pending") throw new PaymentPendingError(signed.signature);
    const refusal = ledgerRefusal(this.#failure(result, signed));
    await this.#mark(signed.signature, "failed", refusal?.name ?? failureText(result), null);
    const invocation = input.invocation;
    throw await refusalError(refusal, failureText(result), {
      agentId: input.agentId,
      amountUnits: input.amountUnits,
      signature: signed.signature,
      balance: () => this.deps.wallets.balance(input.agentId),
      ...(invocation === undefined
        ? {}
        : {
            invocation: {
              address: invocation,
              state: async () => (await this.invocationState(parseAddress(invocation))) ?? { budgetUnits: 0n, spentUnits: 0n },
            },
          }),
    });
  }

  /**
   * Opens the invocation of `agents.invoke` on-chain: the sub-agent's payments under it carry the
   * parent link and cannot exceed `budgetUnits` in total.
   */
  async openInvocation(input: OpenInvocationInput, signal?: AbortSignal): Promise<OpenedInvocation> {
    if (input.budgetUnits <= 0n) throw new InvalidAmountUnitsError(input.budgetUnits, "budget must be positive");
    checkAmountUnits(input.budgetUnits);
    const parentSignature = parseSignature(input.parentTxHash, "parent transaction");
    const { wallets, ledger, pool } = this.deps;
    // The parent is the invoker's own confirmed payment: an invocation cannot hang under a
    // transaction the invoker did not make.
    const parent = await pool.query("SELECT 1 FROM settlements WHERE signature = $1 AND agent_id = $2 AND status = 'confirmed'", [
      input.parentTxHash,
      input.invokerAgentId,
    ]);
    if (parent.rowCount === 0) {
      throw new PaymentError(
        `parent transaction ${input.parentTxHash} is not a confirmed payment of agent ${publicAgentId(input.invokerAgentId)}`,
      );
    }
    const invoker = await wallets.keypair(input.invokerAgentId);
    const subAgent = await wallets.address(input.subAgentId);
    const invocation = invocationPda(parentSignature, subAgent).address;

    // A retried call (the first one's answer was lost) finds the account it opened.
    const existing = await this.invocationState(invocation);
    if (existing !== null) return this.#alreadyOpen(invocation, existing, invoker.publicKey, input.budgetUnits);

    const instruction = await openInvocationInstruction({
      authority: ledger.authority.publicKey,
      invoker: invoker.publicKey,
      parentSignature,
      subAgent,
      budgetUnits: input.budgetUnits,
    });
    const blockhash = await ledger.connection.getLatestBlockhash(COMMITMENT);
    const signed = signTransaction(ledger, new Transaction().add(instruction), blockhash, [invoker]);
    const result = await submit(ledger, signed, signal);
    if (result.status === "confirmed") return { invocation: invocation.toBase58(), txHash: signed.signature, slot: result.slot };
    if (result.status === "pending") throw new PaymentPendingError(signed.signature);
    // Refused because another opener (a retried request, the sweeper) got there first: the
    // account now exists, and with the same terms that is this call's answer too.
    const concurrent = await this.invocationState(invocation);
    if (concurrent !== null) return this.#alreadyOpen(invocation, concurrent, invoker.publicKey, input.budgetUnits);
    const refusal = ledgerRefusal(this.#failure(result, signed));
    const named = refusal === null ? failureText(result) : `payment_ledger ${refusal.name} (${refusal.code})`;
    throw new PaymentError(`open invocation failed: ${named}`, {
      signature: signed.signature,
      ...(refusal === null ? {} : { ledgerError: refusal.name, ledgerCode: refusal.code }),
    });
  }

  async #alreadyOpen(
    invocation: PublicKey,
    state: InvocationState,
    invoker: PublicKey,
    budgetUnits: bigint,
  ): Promise<OpenedInvocation> {
    if (state.invoker !== invoker.toBase58() || state.budgetUnits !== budgetUnits) {
      throw new PaymentError(`invocation ${invocation.toBase58()} is already open with other terms`);
    }
    // The opening is the oldest successful transaction touching the account (newest come first).
    let before: string | undefined;
    for (let page = 0; page < OPENING_LOOKUP_PAGES; page += 1) {
      const list = await this.deps.ledger.connection.getSignaturesForAddress(
        invocation,
        { limit: SIGNATURES_PAGE, ...(before === undefined ? {} : { before }) },
        COMMITMENT,
      );
      if (list.length < SIGNATURES_PAGE) {
        const opening = [...list].reverse().find((entry) => entry.err === null);
        if (opening === undefined) break;
        return { invocation: invocation.toBase58(), txHash: opening.signature, slot: opening.slot };
      }
      before = list.at(-1)!.signature;
    }
    throw new PaymentError(`invocation ${invocation.toBase58()} is open but its opening transaction was not found`);
  }

  /** A settlement the gateway signed, by transaction signature (for retried requests and status reads). */
  async findSettlement(signature: string): Promise<SettlementRecord | null> {
    const rows = await this.deps.pool.query<{
      agent_id: string;
      payment_id: string;
      status: SettlementRecord["status"];
      error: string | null;
      slot: string | null;
      amount_units: string;
    }>("SELECT agent_id, payment_id, status, error, slot, amount_units FROM settlements WHERE signature = $1", [signature]);
    const row = rows.rows[0];
    if (row === undefined) return null;
    return {
      agentId: row.agent_id,
      paymentId: BigInt(row.payment_id),
      txHash: signature,
      amountUnits: BigInt(row.amount_units),
      status: row.status,
      error: row.error,
      slot: row.slot === null ? null : Number(row.slot),
    };
  }

  /** The invocation account as the chain holds it now, or null if there is none. */
  async invocationState(invocation: PublicKey): Promise<InvocationState | null> {
    const account = await this.deps.ledger.connection.getAccountInfo(invocation, COMMITMENT);
    if (account === null || !account.owner.equals(PAYMENT_LEDGER_PROGRAM_ID)) return null;
    const raw = accountsCoder.accounts.decode<{
      invoker: PublicKey;
      sub_agent: PublicKey;
      budget: { toString(): string };
      spent: { toString(): string };
    }>("Invocation", account.data);
    return {
      invoker: raw.invoker.toBase58(),
      subAgent: raw.sub_agent.toBase58(),
      budgetUnits: BigInt(raw.budget.toString()),
      spentUnits: BigInt(raw.spent.toString()),
    };
  }

  /**
   * Resolves pending settlements left by a crash or an unknown send outcome, by signature: landed
   * → confirmed (or failed if it landed with an error); absent once its blockhash can no longer
   * land → failed (nothing moved). Still-valid absent ones stay pending; they are not re-sent, so
   * a payment whose caller saw a crash either already landed or expires.
   */
  async reconcilePending(): Promise<ReconcileReport> {
    const rows = await this.deps.pool.query<{ signature: string; last_valid_block_height: string }>(
      `SELECT signature, last_valid_block_height FROM settlements WHERE status = 'pending'
       ORDER BY created_at LIMIT ${RECONCILE_BATCH}`,
    );
    const outcomes = await lookUpOutcomes(
      this.deps.ledger,
      rows.rows.map((row) => ({ signature: row.signature, lastValidBlockHeight: Number(row.last_valid_block_height) })),
    );
    const report = { confirmed: [] as string[], failed: [] as string[], pending: [] as string[] };
    for (const [i, outcome] of outcomes.entries()) {
      const { signature } = rows.rows[i]!;
      report[outcome.status].push(signature);
      if (outcome.status === "confirmed") await this.#mark(signature, "confirmed", null, outcome.slot);
      if (outcome.status === "failed") {
        const error = outcome.reason === "expired" ? "expired" : await this.#includedError(signature, outcome.err);
        await this.#mark(signature, "failed", error, outcome.reason === "included" ? outcome.slot : null);
      }
    }
    return report;
  }

  async #includedError(signature: string, err: unknown): Promise<string> {
    const row = await this.deps.pool.query<{ transaction: string }>("SELECT transaction FROM settlements WHERE signature = $1", [
      signature,
    ]);
    const wire = row.rows[0]?.transaction;
    if (wire === undefined) return "included";
    const programIds = Transaction.from(Buffer.from(wire, "base64")).instructions.map((ix) => ix.programId);
    return ledgerRefusal({ kind: "included", err, programIds })?.name ?? `included: ${JSON.stringify(err)}`;
  }

  #failure(result: Exclude<SubmitResult, { status: "confirmed" } | { status: "pending" }>, signed: SignedTransaction) {
    if (result.status === "rejected") return { kind: "rejected" as const, error: result.error };
    const programIds = Transaction.from(Buffer.from(signed.wire, "base64")).instructions.map((ix) => ix.programId);
    return { kind: "included" as const, err: result.reason === "included" ? result.err : null, programIds };
  }

  /** Payee rule 2 (payee.ts): the payee's account and its token account, as the chain holds them. */
  async #payeeAccountsCheck(payee: PublicKey): Promise<{ readonly createTokenAccount: boolean }> {
    const { ledger } = this.deps;
    const tokenAccount = getAssociatedTokenAddressSync(ledger.mint, payee, true);
    const [wallet, token] = await ledger.connection.getMultipleAccountsInfo([payee, tokenAccount], COMMITMENT);
    return checkPayeeAccounts(payee.toBase58(), {
      payee: wallet == null ? null : { owner: wallet.owner, executable: wallet.executable },
      tokenAccount: token == null ? null : { owner: token.owner },
    });
  }

  /**
   * Payee rule 3: the authority pays the rent of a new payee token account at most `quota` times
   * per paying account in 24 hours. Counted under a per-account transaction lock, so concurrent
   * settlements cannot both take the last one; failed settlements created nothing and do not count.
   */
  async #claimPayeeAccountQuota(client: pg.PoolClient, agentId: string, payee: string): Promise<void> {
    const quota = this.deps.payeeAccountQuota ?? DEFAULT_PAYEE_ACCOUNT_QUOTA;
    await client.query("SELECT pg_advisory_xact_lock(hashtext('payee-accounts:' || account_id)) FROM agents WHERE agent_id = $1", [agentId]);
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n
       FROM settlements s JOIN agents a ON a.agent_id = s.agent_id
       WHERE a.account_id = (SELECT account_id FROM agents WHERE agent_id = $1)
         AND s.payee_account_created AND s.status <> 'failed' AND s.created_at > now() - interval '24 hours'`,
      [agentId],
    );
    if ((rows[0]?.n ?? 0) >= quota) {
      throw new PayeeRefusedError(
        "payee_account_quota",
        payee,
        `the payee has no token account, and this account's quota of ${quota} new payee token accounts per 24 hours is used up: the payee must create its token account first`,
      );
    }
  }

  async #instructions(
    input: SettlePaymentInput,
    parsed: ParsedInput,
    payer: PublicKey,
    paymentId: bigint,
    createPayeeAccount: boolean,
  ): Promise<TransactionInstruction[]> {
    const { ledger } = this.deps;
    const transfer = parsed.atomic ? associatedTransferAccounts(payer, parsed.payee, ledger.mint) : null;
    const record = await recordPaymentInstruction({
      authority: ledger.authority.publicKey,
      payer,
      payee: parsed.payee,
      paymentId,
      amountUnits: input.amountUnits,
      protocol: input.protocol,
      rail: input.rail,
      endpointHash: parsed.endpointHash,
      settlementReference: parsed.settlementReference,
      invocation: parsed.invocation,
      transfer,
    });
    if (transfer === null || !createPayeeAccount) return [record];
    // A wallet payee without a token account of the mint cannot be paid; create it (the authority
    // pays the rent, within the account's quota: #claimPayeeAccountQuota) rather than fail.
    const payeeToken = getAssociatedTokenAddressSync(ledger.mint, parsed.payee, true);
    const { publicKey } = ledger.authority;
    return [createAssociatedTokenAccountIdempotentInstruction(publicKey, payeeToken, parsed.payee, ledger.mint), record];
  }

  async #mark(signature: string, status: "confirmed" | "failed", error: string | null, slot: number | null): Promise<void> {
    await this.deps.pool.query(
      `UPDATE settlements SET status = $2, error = $3, slot = $4, updated_at = now()
       WHERE signature = $1 AND status = 'pending'`,
      [signature, status, error, slot],
    );
  }
}

function failureText(result: SubmitResult): string {
  if (result.status === "rejected") return `rejected by the RPC node: ${(result.error as Error).message}`;
  if (result.status === "failed") return result.reason === "expired" ? "expired before it landed" : "included with an error";
  return result.status;
}
