/**
 * Settlement: the one call every protocol and rail uses to put a payment on the ledger, one
 * `record_payment` co-signed by the service authority (on the stablecoin rail without a settlement
 * reference the program moves the tokens in the same instruction; other rails are only recorded).
 *
 * Crash safety: (1) the chain checks (balance, invocation budget, a shared recent blockhash),
 * nothing written; (2) one transaction allocates the payment id, signs locally and inserts the
 * `settlements` row `pending` with the signed bytes; (3) send; (4) mark `confirmed` or `failed`.
 * A pending row left by a crash is resolved by `reconcilePending` from its signature; ids are
 * never reused and a pending row is never re-signed, so nothing is lost or paid twice.
 *
 * No SQL here (store.ts owns the rows). Invocation accounts and the payer's wallets are given to
 * it as interfaces (`InvocationAccounts`, `PayerWallets`), since both build on this floor.
 */
import { createAssociatedTokenAccountIdempotentInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { type Keypair, type PublicKey, Transaction, type TransactionInstruction } from "@solana/web3.js";
import bs58 from "bs58";
import type pg from "pg";
import type { Logger } from "pino";
import { associatedTransferAccounts, recordPaymentInstruction } from "../../../programs/payment_ledger/ts/index.js";
import { withTransaction } from "../../../indexer/db/database.js";
import { publicAgentId } from "../../shared/agent-ids.js";
import { InsufficientFundsError, PaymentError, PaymentPendingError } from "../chain/errors.js";
import {
  COMMITMENT,
  parseAddress,
  recentBlockhash,
  type SettlementLedger,
  type SignedTransaction,
  signTransaction,
  submit,
  tokenBalanceUnits,
} from "../chain/ledger.js";
import type { Settler, SettleResult } from "./settler.js";
import {
  checkInvocationPayment,
  type InvocationAccounts,
  type InvocationState,
  type OpenedInvocation,
  type OpenInvocationInput,
} from "./invocation-accounts.js";
import { failureText, ledgerRefusal, refusalError, submitFailure } from "../chain/ledger-errors.js";
import { checkPayee, checkPayeeAccounts, DEFAULT_PAYEE_ACCOUNT_QUOTA, PayeeRefusedError } from "../chain/payee.js";
import { type ReconcileReport, reconcilePendingSettlements } from "./reconciliation.js";
import { type ParsedInput, parseInput, type SettlePaymentInput } from "./settle-input.js";
import {
  allocatePaymentId,
  findSettlement,
  insertPendingSettlement,
  lockPayeeAccountQuota,
  markSettlement,
  payeeAccountsCreatedToday,
  type SettlementRecord,
} from "./store.js";

// The settle path's public API, re-exported so that callers need one import.
export type { InvocationAccounts, InvocationState, OpenedInvocation, OpenInvocationInput } from "./invocation-accounts.js";
export type { ReconcileReport } from "./reconciliation.js";
export type { SettlePaymentInput } from "./settle-input.js";
export type { SettlementRecord } from "./store.js";

export type SettlementResult = SettleResult;

/** A settlement committed as `pending` and signed, not yet sent. */
export interface PreparedSettlement {
  readonly input: SettlePaymentInput;
  readonly paymentId: bigint;
  readonly signed: SignedTransaction;
}

/** The custodial wallets as settlement uses them (api/gateway/wallets' `AgentWallets`): the payer's key and balance. */
export interface PayerWallets {
  keypair(agentId: string): Promise<Keypair>;
  balance(agentId: string): Promise<bigint>;
}

export interface SettlementDeps {
  readonly pool: pg.Pool;
  readonly wallets: PayerWallets;
  readonly ledger: SettlementLedger;
  /** The invocation accounts payments under `agents.invoke` are checked against (api/gateway/invocations' `LedgerInvocations`). */
  readonly invocations: InvocationAccounts;
  /**
   * New payee token accounts the authority pays rent for, per paying account in any 24 hours
   * (api/gateway/chain/payee.ts); `DEFAULT_PAYEE_ACCOUNT_QUOTA` when absent.
   */
  readonly payeeAccountQuota?: number;
  /** One line per payment settled or refused (with the request's id when a request caused it). */
  readonly logger?: Logger;
}

/** Implements the protocol layer's `Settler` (api/gateway/settlement/settler.ts) for x402 and MPP. */
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
    if (parsed.payee.equals(ledger.programId)) {
      throw new PayeeRefusedError("payee_is_program", parsed.payee.toBase58(), "the payee is the payment_ledger program, not a wallet");
    }
    const payer = await wallets.keypair(input.agentId);
    // The chain reads are independent: made together, and the blockhash is a shared recent one
    // (api/gateway/chain/ledger.ts `recentBlockhash`; the row keeps its last valid block height).
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
      checkInvocationPayment(parsed.invocation.toBase58(), invocation, payer.publicKey.toBase58(), input.amountUnits);
    }

    // One transaction, so that an id is allocated only together with its pending row (ids stay
    // contiguous across a crash); four round trips: BEGIN, the allocation (and the endpoint row)
    // in one statement, the pending row, COMMIT. Values are always bound parameters. The allocation's row lock serializes the
    // agent's settlements for the few milliseconds of signing.
    const hashHex = Buffer.from(parsed.endpointHash).toString("hex");
    return withTransaction(pool, async (client) => {
      const paymentId = await allocatePaymentId(client, {
        endpointHash: hashHex,
        endpoint: parsed.endpoint,
        domain: parsed.domain,
        agentId: input.agentId,
      });
      if (paymentId === null) throw new PaymentError(`agent ${publicAgentId(input.agentId)} has no wallet`);
      if (createPayeeAccount) await this.#claimPayeeAccountQuota(client, input.agentId, parsed.payee.toBase58());
      const instructions = await this.#instructions(input, parsed, payer.publicKey, paymentId, createPayeeAccount);
      const signed = signTransaction(ledger, new Transaction().add(...instructions), blockhash, [payer]);
      await insertPendingSettlement(client, {
        agentId: input.agentId,
        paymentId,
        signature: signed.signature,
        payer: payer.publicKey.toBase58(),
        payee: parsed.payee.toBase58(),
        amountUnits: input.amountUnits,
        protocol: input.protocol,
        rail: input.rail,
        endpointHash: hashHex,
        invocation: parsed.invocation?.toBase58() ?? null,
        settlementReference: parsed.settlementReference === null ? null : bs58.encode(parsed.settlementReference),
        transaction: signed.wire,
        lastValidBlockHeight: signed.lastValidBlockHeight,
        paymentRef: input.paymentRef ?? null,
        payeeAccountCreated: createPayeeAccount,
      });
      if (input.bindClaim !== undefined && !(await input.bindClaim(client, signed.signature))) {
        throw new PaymentError("the payment's claim was given up before its settlement was prepared: nothing was sent");
      }
      return { input, paymentId, signed };
    });
  }

  /** Steps 3-4: sends a prepared settlement and records its outcome. */
  async completeSettlement(prepared: PreparedSettlement, signal?: AbortSignal): Promise<SettlementResult> {
    const { signed, input } = prepared;
    const result = await submit(this.deps.ledger, signed, signal);
    if (result.status === "confirmed") {
      // The chain is the truth: the payment happened even if this write fails (the reconciler
      // marks the row later), so a database error here does not turn success into an error.
      await markSettlement(this.deps.pool, signed.signature, "confirmed", null, result.slot).catch(() => undefined);
      this.#payeeAccounts.add(input.payee);
      this.deps.logger?.info(
        { paymentId: String(prepared.paymentId), signature: signed.signature, protocol: input.protocol, rail: input.rail },
        "payment settled",
      );
      return { txHash: signed.signature, slot: result.slot, paymentId: prepared.paymentId };
    }
    if (result.status === "pending") throw new PaymentPendingError(signed.signature);
    const refusal = ledgerRefusal(submitFailure(result, signed), this.deps.ledger.programId);
    this.deps.logger?.warn(
      { paymentId: String(prepared.paymentId), signature: signed.signature, refusal: refusal?.name ?? failureText(result) },
      "payment not settled",
    );
    // Refused before sending: failed, but followed until the signed bytes can no longer land.
    await markSettlement(
      this.deps.pool,
      signed.signature,
      "failed",
      refusal?.name ?? failureText(result),
      null,
      result.status === "rejected",
    );
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
   * parent link and cannot exceed `budgetUnits` in total (api/gateway/invocations/ledger.ts).
   */
  openInvocation(input: OpenInvocationInput, signal?: AbortSignal): Promise<OpenedInvocation> {
    return this.deps.invocations.openInvocation(input, signal);
  }

  /** The invocation account as the chain holds it now, or null if there is none. */
  get programId(): PublicKey {
    return this.deps.ledger.programId;
  }

  invocationState(invocation: PublicKey): Promise<InvocationState | null> {
    return this.deps.invocations.invocationState(invocation);
  }

  /** A settlement the gateway signed, by transaction signature (for retried requests and status reads). */
  findSettlement(signature: string): Promise<SettlementRecord | null> {
    return findSettlement(this.deps.pool, signature);
  }

  /** Resolves pending settlements left by a crash or an unknown send outcome (reconciliation.ts). */
  reconcilePending(): Promise<ReconcileReport> {
    return reconcilePendingSettlements(this.deps);
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
    await lockPayeeAccountQuota(client, agentId);
    const created = await payeeAccountsCreatedToday(client, agentId);
    if (created >= quota) {
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
      programId: ledger.programId,
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
}
