/**
 * Invocations on payment_ledger: opening one for `agents.invoke` and reading its account. The
 * chain is the truth for an invocation's terms and what was spent under it; nothing here is cached.
 */
import { BorshCoder } from "@coral-xyz/anchor";
import { type PublicKey, Transaction } from "@solana/web3.js";
import type pg from "pg";
import { invocationPda, openInvocationInstruction, PAYMENT_LEDGER_IDL } from "../../../programs/payment_ledger/ts/index.js";
import { publicAgentId } from "../../shared/agent-ids.js";
import { failureText, ledgerRefusal, submitFailure } from "../chain/ledger-errors.js";
import { parseSignature } from "../settlement/settle-input.js";
import { confirmedPaymentPayee } from "../settlement/store.js";
import { InvalidAmountUnitsError, PaymentError, PaymentPendingError } from "../chain/errors.js";
import { COMMITMENT, checkAmountUnits, type SettlementLedger, signTransaction, submit } from "../chain/ledger.js";
import type { AgentWallets } from "../wallets/wallets.js";
import type { InvocationAccount, InvocationAccounts, OpenedInvocation, OpenInvocationInput } from "../settlement/invocation-accounts.js";

const SIGNATURES_PAGE = 1_000;
/** An invocation has at most this many pages of payments before its opening is given up on. */
const OPENING_LOOKUP_PAGES = 20;
const accountsCoder = new BorshCoder(PAYMENT_LEDGER_IDL);

export type {
  InvocationAccount,
  InvocationState,
  OpenedInvocation,
  OpenInvocationInput,
} from "../settlement/invocation-accounts.js";

/**
 * Opens and reads `agents.invoke` invocations on the ledger (`LedgerInvocations`, exposed by
 * api/gateway/settlement's `Settlement`). `openInvocation` must be idempotent for the same terms: a retry
 * finds the account it opened.
 */
export interface Invocations {
  openInvocation(input: {
    invokerAgentId: string;
    parentTxHash: string;
    subAgentId: string;
    budgetUnits: bigint;
  }): Promise<{ readonly invocation: string; readonly txHash: string }>;
  invocationState(invocation: PublicKey): Promise<InvocationAccount | null>;
  /** The program the invocations live in (PROGRAM_ID). */
  readonly programId: PublicKey;
}

export interface LedgerInvocationsDeps {
  readonly pool: pg.Pool;
  readonly wallets: AgentWallets;
  readonly ledger: SettlementLedger;
}

export class LedgerInvocations implements Invocations, InvocationAccounts {
  constructor(private readonly deps: LedgerInvocationsDeps) {}

  get programId(): PublicKey {
    return this.deps.ledger.programId;
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
    if ((await confirmedPaymentPayee(pool, input.parentTxHash, input.invokerAgentId)) === null) {
      throw new PaymentError(
        `parent transaction ${input.parentTxHash} is not a confirmed payment of agent ${publicAgentId(input.invokerAgentId)}`,
      );
    }
    const invoker = await wallets.keypair(input.invokerAgentId);
    const subAgent = await wallets.address(input.subAgentId);
    const invocation = invocationPda(parentSignature, subAgent, ledger.programId).address;

    // A retried call (the first one's answer was lost) finds the account it opened.
    const existing = await this.invocationState(invocation);
    if (existing !== null) return this.#alreadyOpen(invocation, existing, invoker.publicKey, input.budgetUnits);

    const instruction = await openInvocationInstruction({
      programId: ledger.programId,
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
    const refusal = ledgerRefusal(submitFailure(result, signed), ledger.programId);
    const named = refusal === null ? failureText(result) : `payment_ledger ${refusal.name} (${refusal.code})`;
    throw new PaymentError(`open invocation failed: ${named}`, {
      signature: signed.signature,
      ...(refusal === null ? {} : { ledgerError: refusal.name, ledgerCode: refusal.code }),
    });
  }

  async #alreadyOpen(invocation: PublicKey, state: InvocationAccount, invoker: PublicKey, budgetUnits: bigint): Promise<OpenedInvocation> {
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

  /** The invocation account as the chain holds it now, or null if there is none. */
  async invocationState(invocation: PublicKey): Promise<InvocationAccount | null> {
    const account = await this.deps.ledger.connection.getAccountInfo(invocation, COMMITMENT);
    if (account === null || !account.owner.equals(this.deps.ledger.programId)) return null;
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
}
