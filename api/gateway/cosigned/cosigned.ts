/**
 * Payments by wallets the gateway does not hold: the payer signs its own transfer, the gateway
 * co-signs it as fee payer (an x402 `exact` payload, x402/exact.ts; an MPP `solana` charge,
 * mpp/solana-charge.ts). `settle`: check the transaction (check.ts) and the payee; simulate it
 * unsigned; admit a new attested payer within the account's quota; co-sign and claim its id in
 * `cosigned_transfers` before sending (at most one settlement per transaction, replays are
 * `duplicate_settlement`); send and await the outcome (unknown → `settlement_pending`, for the
 * reconciler); then record it with `record_attested_payment` naming the transfer, unless the
 * payer is one of our agents (whose side records it). A landed transfer stands even if the record
 * fails; the reconciler records it later.
 *
 * Only a success names the transfer's id: a signed transaction that was not sent never leaves the
 * gateway, or anyone could broadcast it and have the fee payer pay for its failure. The fee payer
 * is a dedicated key holding only SOL, so a rule missed in check.ts can spend fees, never attest.
 */
import { type Keypair, PublicKey, Transaction, type VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import type pg from "pg";
import { endpointHash, endpointText, recordAttestedPaymentInstruction } from "../../../programs/payment_ledger/ts/index.js";
import { endpointHost } from "../../shared/policy/domains.js";
import type { ReconcileReport } from "../settlement/reconciliation.js";
import { payeeRefusal } from "../chain/payee.js";
import { lamportsSpent, SolSpent } from "../settlement/sol-spent.js";
import { COMMITMENT, lookUpOutcomes, recentBlockhash, type SettlementLedger, signTransaction, submit } from "../chain/ledger.js";
import type { AgentDirectory } from "../settlement/settler.js";
import {
  type CheckReason,
  checkTransferTransaction,
  TOKEN_PROGRAM,
  type TransferLayout,
  type TransferTerms,
  transactionId,
} from "./check.js";
import {
  admitAttestedPayer,
  claimCosignedTransfer,
  cosignedTransfer,
  cosignedTransferByPayerSignature,
  type CosignedRow,
  endWatch,
  markLateLanding,
  markRecord,
  markTransfer,
  openCosignedTransfers,
  prepareRecord,
  rememberEndpoint,
  watchedCosignedTransfers,
} from "./store.js";

/** Default bound on new attested payers (payer states whose rent the authority pays) per account in 24 hours. */
export const DEFAULT_ATTESTED_PAYER_QUOTA = 100;

export interface CosignedDeps {
  readonly pool: pg.Pool;
  readonly ledger: SettlementLedger;
  /** The dedicated key that pays the fees of the payers' transactions (see the header). */
  readonly feePayer: Keypair;
  /** Tells the payers who are the gateway's agents (their side records their payments). */
  readonly agents: AgentDirectory;
  /** Told about work left for the reconciler (a record not landed). Never secrets. */
  readonly onWarning?: (message: string, context: Record<string, unknown>) => void;
  /** New attested payers per presenting account in any 24 hours; `DEFAULT_ATTESTED_PAYER_QUOTA` when absent. */
  readonly attestedPayerQuota?: number;
  /** Where the SOL spent by the fee payer and the authority is counted; a fresh one when absent. */
  readonly solSpent?: SolSpent;
}

/** A payer's transaction presented to the gateway, and what it must pay. */
export interface CosignedPayment {
  readonly protocol: "x402" | "mpp";
  /** The resource server's account presenting it. */
  readonly accountId: string;
  /** The paid resource's URL (recorded as the endpoint). */
  readonly endpoint: string;
  /** Base64 wire bytes as the payer signed them. */
  readonly transaction: string;
  readonly layout: TransferLayout;
  readonly payTo: string;
  readonly amountUnits: bigint;
  readonly memo?: string | undefined;
}

export type CosignedFailure =
  | CheckReason
  | "payee_refused"
  | "invalid_exact_svm_transaction_simulation_failed"
  | "invalid_exact_svm_transaction_failed"
  | "duplicate_settlement"
  | "attested_payer_quota_exceeded"
  | "settlement_pending";

export type CosignedVerify =
  | { readonly ok: true; readonly payer: string }
  | { readonly ok: false; readonly reason: CosignedFailure; readonly detail: string; readonly payer: string };

export interface CosignedRecord {
  /** The record transaction, or null when the payer's own side records it (or it is not prepared yet). */
  readonly signature: string | null;
  readonly status: "confirmed" | "pending" | "by_payer";
}

export type CosignedSettle =
  | {
      readonly ok: true;
      readonly payer: string;
      /** The transfer's transaction id: what moved the tokens. */
      readonly signature: string;
      readonly slot: number;
      readonly record: CosignedRecord;
    }
  | {
      readonly ok: false;
      readonly reason: CosignedFailure;
      readonly detail: string;
      readonly payer: string;
    };

const RECONCILE_BATCH = 128;

export class CosignedTransfers {
  readonly #feePayer: string;
  /** SOL spent by the fee payer and the authority on co-signed payments, by kind. */
  readonly spent: SolSpent;

  constructor(private readonly deps: CosignedDeps) {
    this.#feePayer = deps.feePayer.publicKey.toBase58();
    this.spent = deps.solSpent ?? new SolSpent();
  }

  /** The fee payer's address: what x402 `extra.feePayer` and MPP `feePayerKey` name. */
  get feePayer(): string {
    return this.#feePayer;
  }

  /** The settlement mint, its decimals and token program: the only asset accepted. */
  get asset(): { readonly mint: string; readonly decimals: number; readonly tokenProgram: string } {
    return { mint: this.deps.ledger.mint.toBase58(), decimals: this.deps.ledger.decimals, tokenProgram: TOKEN_PROGRAM };
  }

  get network(): string {
    return this.deps.ledger.network;
  }

  /** Every check but the claim, and a simulation without the fee payer's signature. Nothing is signed or sent. */
  async verify(payment: CosignedPayment): Promise<CosignedVerify> {
    const checked = this.#check(payment);
    if (!checked.ok) return checked;
    if ((await cosignedTransferByPayerSignature(this.deps.pool, checked.payerSignature)) !== null) {
      return { ok: false, reason: "duplicate_settlement", detail: "this transaction was already presented", payer: checked.payer };
    }
    const refused = await this.#simulate(checked.transaction, checked.payer);
    if (refused !== null) return refused;
    return { ok: true, payer: checked.payer };
  }

  /** Checks, simulates, admits, co-signs, claims, sends, records (see the header). At most one success per transaction. */
  async settle(payment: CosignedPayment, signal?: AbortSignal): Promise<CosignedSettle> {
    const checked = this.#check(payment);
    if (!checked.ok) return checked;
    const { pool, ledger } = this.deps;
    const { payer, transaction } = checked;
    const duplicate = { ok: false, reason: "duplicate_settlement", detail: "this transaction was already settled", payer } as const;
    if ((await cosignedTransferByPayerSignature(pool, checked.payerSignature)) !== null) return duplicate;
    const refused = await this.#simulate(transaction, payer);
    if (refused !== null) return refused;
    const agent = await this.deps.agents.agentIdForAddress(payer);
    if (agent === null) {
      const quota = this.deps.attestedPayerQuota ?? DEFAULT_ATTESTED_PAYER_QUOTA;
      const admission = await admitAttestedPayer(pool, { payer, accountId: payment.accountId, quota });
      if (admission === "quota_exceeded") {
        const detail = `${payer} has no payment_ledger state yet, and this account's quota of ${quota} new payers per 24 hours is used up`;
        return { ok: false, reason: "attested_payer_quota_exceeded", detail, payer };
      }
    }
    // The client's blockhash is no newer than the latest: the latest's height bounds its validity.
    const { lastValidBlockHeight } = await recentBlockhash(ledger);
    // The last step before the claim and the send: the co-signed bytes exist only from here on.
    transaction.sign([this.deps.feePayer]);
    const signature = transactionId(transaction);
    const wire = Buffer.from(transaction.serialize()).toString("base64");
    const claimed = await claimCosignedTransfer(pool, {
      signature,
      payerSignature: checked.payerSignature,
      protocol: payment.protocol,
      accountId: payment.accountId,
      payer,
      payee: payment.payTo,
      mint: ledger.mint.toBase58(),
      amountUnits: payment.amountUnits,
      endpoint: endpointText(payment.endpoint),
      transaction: wire,
      lastValidBlockHeight,
      record: agent === null ? "attest" : "payer",
    });
    if (!claimed) return duplicate;

    const outcome = await submit(ledger, { signature, wire, lastValidBlockHeight }, signal);
    if (outcome.status === "pending") {
      return { ok: false, reason: "settlement_pending", detail: "sent; its outcome is not known yet", payer };
    }
    if (outcome.status === "rejected") {
      // Refused before sending; the bytes stay here, yet the row is followed until they expire.
      const detail = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
      await markTransfer(pool, signature, "failed", null, detail.slice(0, 1_000), true);
      return { ok: false, reason: "invalid_exact_svm_transaction_simulation_failed", detail, payer };
    }
    if (outcome.status === "failed") {
      const detail = outcome.reason === "expired" ? "expired" : `included: ${JSON.stringify(outcome.err)}`;
      await markTransfer(pool, signature, "failed", outcome.reason === "included" ? outcome.slot : null, detail);
      if (outcome.reason === "included") await this.#countFee(signature);
      return { ok: false, reason: "invalid_exact_svm_transaction_failed", detail, payer };
    }
    // The tokens moved: from here on the answer is a success whatever the bookkeeping does.
    await markTransfer(pool, signature, "confirmed", outcome.slot, null).catch(() => undefined);
    await this.#countFee(signature);
    const record = agent === null ? await this.#record(signature, signal) : ({ signature: null, status: "by_payer" } as const);
    return { ok: true, payer, signature, slot: outcome.slot, record };
  }

  /**
   * What an earlier `settle` of this same transaction left, or null when none claimed it: how a
   * retried request (the same Idempotency-Key, its first attempt cut short or pending) resolves
   * without sending again. Never a second success for a different request: only the route that
   * holds the first attempt's key calls this.
   */
  async outcomeOf(payment: CosignedPayment): Promise<CosignedSettle | null> {
    const checked = this.#check(payment);
    if (!checked.ok) return null;
    const { pool } = this.deps;
    let row = await cosignedTransferByPayerSignature(pool, checked.payerSignature);
    if (row === null) return null;
    if (row.status === "pending" || (row.status === "failed" && row.watch)) {
      await this.#follow([row]);
      row = (await cosignedTransfer(pool, row.signature))!;
    }
    const { payer, signature } = row;
    if (row.status === "pending") return { ok: false, reason: "settlement_pending", detail: "sent; its outcome is not known yet", payer };
    if (row.status === "failed") return { ok: false, reason: "invalid_exact_svm_transaction_failed", detail: "the transfer failed", payer };
    const record = row.record === "payer" ? ({ signature: null, status: "by_payer" } as const) : await this.#record(signature);
    return { ok: true, payer, signature, slot: row.slot ?? 0, record };
  }

  /**
   * Resolves what `settle` left open (a crash, an unknown outcome, a record that failed, a
   * refused transfer whose bytes could still land): pending and watched transfers by their
   * signature, then records of confirmed attested transfers. Bounded batch.
   */
  async reconcilePending(): Promise<ReconcileReport> {
    const report = { confirmed: [] as string[], failed: [] as string[], pending: [] as string[] };
    const rows = await openCosignedTransfers(this.deps.pool, RECONCILE_BATCH);
    const watched = await watchedCosignedTransfers(this.deps.pool, RECONCILE_BATCH);
    const followed = await this.#follow([...rows.filter((row) => row.status === "pending"), ...watched]);
    for (const [signature, status] of followed) {
      if (status === "pending") report.pending.push(signature);
      else if (status === "failed") report.failed.push(signature);
    }
    const recordable = await openCosignedTransfers(this.deps.pool, RECONCILE_BATCH);
    for (const row of recordable) {
      if (row.status !== "confirmed" || row.record !== "attest") continue;
      if (row.recordStatus === "pending" && row.recordSignature !== null) {
        const [outcome] = await lookUpOutcomes(this.deps.ledger, [
          { signature: row.recordSignature, lastValidBlockHeight: row.recordLastValidBlockHeight ?? 0 },
        ]);
        if (outcome!.status === "pending") {
          report.pending.push(row.signature);
          continue;
        }
        const failure = outcome!.status === "failed" ? (outcome!.reason === "expired" ? "expired" : JSON.stringify(outcome!.err)) : null;
        await markRecord(this.deps.pool, row.recordSignature, outcome!.status, failure);
        if (outcome!.status === "confirmed") {
          await this.#countRecord(row.recordSignature);
          report.confirmed.push(row.signature);
          continue;
        }
      }
      const record = await this.#record(row.signature);
      (record.status === "confirmed" ? report.confirmed : report.pending).push(row.signature);
    }
    return report;
  }

  /**
   * Looks pending and watched transfers up on the ledger and writes what it learned: landed →
   * confirmed (a watched failed row included: the chain is the truth), included with an error or
   * expired → failed for good. Returns each row's status after the lookup.
   */
  async #follow(rows: readonly CosignedRow[]): Promise<Map<string, "pending" | "confirmed" | "failed">> {
    const { pool, ledger } = this.deps;
    const statuses = new Map<string, "pending" | "confirmed" | "failed">();
    const outcomes = await lookUpOutcomes(ledger, rows);
    for (const [i, outcome] of outcomes.entries()) {
      const row = rows[i]!;
      if (outcome.status === "pending") {
        statuses.set(row.signature, row.status === "failed" ? "failed" : "pending");
        continue;
      }
      if (outcome.status === "confirmed") {
        if (row.status === "failed") {
          if (await markLateLanding(pool, row.signature, outcome.slot)) {
            this.deps.onWarning?.("a transfer marked failed landed later; recorded now", { signature: row.signature });
          }
        } else await markTransfer(pool, row.signature, "confirmed", outcome.slot, null);
        await this.#countFee(row.signature);
        statuses.set(row.signature, "confirmed");
        continue;
      }
      const detail = outcome.reason === "expired" ? "expired" : `included: ${JSON.stringify(outcome.err)}`;
      if (row.status === "failed") await endWatch(pool, row.signature, detail);
      else await markTransfer(pool, row.signature, "failed", outcome.reason === "included" ? outcome.slot : null, detail);
      if (outcome.reason === "included") await this.#countFee(row.signature);
      statuses.set(row.signature, "failed");
    }
    return statuses;
  }

  /** The fee payer's fee of a landed transfer, into the counters (best effort: a lookup error counts nothing). */
  async #countFee(signature: string): Promise<void> {
    const spent = await lamportsSpent(this.deps.ledger.connection, signature, this.deps.feePayer.publicKey).catch(() => null);
    if (spent !== null) this.spent.add("fee_payer_fee", spent.fee + spent.other);
  }

  /** The authority's fee and the rent of a landed record (a new payer state's), into the counters. */
  async #countRecord(signature: string): Promise<void> {
    const spent = await lamportsSpent(this.deps.ledger.connection, signature, this.deps.ledger.authority.publicKey).catch(() => null);
    if (spent === null) return;
    this.spent.add("authority_fee", spent.fee);
    this.spent.add("authority_rent", spent.other);
  }

  /** Simulates the transaction as the payer signed it (no fee payer signature); null when it would succeed. */
  async #simulate(transaction: VersionedTransaction, payer: string): Promise<(CosignedVerify & { ok: false }) | null> {
    const simulated = await this.deps.ledger.connection.simulateTransaction(transaction, { sigVerify: false, commitment: COMMITMENT });
    if (simulated.value.err === null) return null;
    const detail = `${JSON.stringify(simulated.value.err)} ${(simulated.value.logs ?? []).slice(-3).join(" | ")}`;
    return { ok: false, reason: "invalid_exact_svm_transaction_simulation_failed", detail, payer };
  }

  #check(
    payment: CosignedPayment,
  ): { ok: true; transaction: VersionedTransaction; payer: string; payerSignature: string } | (CosignedVerify & { ok: false }) {
    const asset = this.asset;
    const terms: TransferTerms = {
      feePayer: this.#feePayer,
      mint: asset.mint,
      decimals: asset.decimals,
      tokenProgram: asset.tokenProgram,
      payTo: payment.payTo,
      amountUnits: payment.amountUnits,
      memo: payment.memo,
    };
    const checked = checkTransferTransaction(payment.transaction, terms, payment.layout);
    if (!checked.ok) return { ok: false, reason: checked.reason, detail: checked.detail, payer: checked.payer };
    const payee = payeeRefusal(payment.payTo, [asset.mint]);
    if (payee !== null) return { ok: false, reason: "payee_refused", detail: payee.message, payer: checked.payer };
    // check.ts verified it: the second signature is the payer's, over this message.
    const payerSignature = Buffer.from(checked.transaction.signatures[1]!).toString("hex");
    return { ok: true, transaction: checked.transaction, payer: checked.payer, payerSignature };
  }

  /** Prepares (if needed), sends and awaits the attested record of a confirmed transfer. */
  async #record(signature: string, signal?: AbortSignal): Promise<CosignedRecord> {
    const { pool, ledger } = this.deps;
    try {
      const row = await cosignedTransfer(pool, signature);
      if (row === null) throw new Error(`no co-signed transfer ${signature}`);
      if (row.recordStatus === "confirmed") return { signature: row.recordSignature, status: "confirmed" };
      const endpoint = row.endpoint;
      const hash = endpointHash(endpoint);
      await rememberEndpoint(pool, Buffer.from(hash).toString("hex"), endpoint, endpointHost(endpoint));
      const prepared =
        (await prepareRecord(pool, signature, async (paymentId) => {
          const instruction = await recordAttestedPaymentInstruction({
            programId: ledger.programId,
            authority: ledger.authority.publicKey,
            payer: new PublicKey(row.payer),
            payee: new PublicKey(row.payee),
            paymentId,
            amountUnits: row.amountUnits,
            protocol: row.protocol,
            endpointHash: hash,
            settlementReference: bs58.decode(signature),
          });
          return signTransaction(ledger, new Transaction().add(instruction), await recentBlockhash(ledger), []);
        })) ??
        // Another caller prepared it: resend those bytes (they land at most once).
        (await this.#preparedRecord(signature));
      if (prepared === null) return { signature: null, status: "pending" };
      const outcome = await submit(ledger, prepared, signal);
      if (outcome.status === "confirmed") {
        await markRecord(pool, prepared.signature, "confirmed", null);
        await this.#countRecord(prepared.signature);
        return { signature: prepared.signature, status: "confirmed" };
      }
      if (outcome.status === "failed" || outcome.status === "rejected") {
        const detail = outcome.status === "rejected" ? String(outcome.error) : outcome.reason;
        await markRecord(pool, prepared.signature, "failed", detail.slice(0, 1_000));
        this.deps.onWarning?.("attested record failed; the reconciler records it again", { signature, detail });
      }
      return { signature: prepared.signature, status: "pending" };
    } catch (error) {
      this.deps.onWarning?.("attested record not made; the reconciler records it", {
        signature,
        error: error instanceof Error ? error.message : String(error),
      });
      return { signature: null, status: "pending" };
    }
  }

  async #preparedRecord(signature: string): Promise<{ signature: string; wire: string; lastValidBlockHeight: number } | null> {
    const row = await cosignedTransfer(this.deps.pool, signature);
    if (row?.recordStatus !== "pending" || row.recordSignature === null || row.recordTransaction === null) return null;
    return { signature: row.recordSignature, wire: row.recordTransaction, lastValidBlockHeight: row.recordLastValidBlockHeight ?? 0 };
  }
}
