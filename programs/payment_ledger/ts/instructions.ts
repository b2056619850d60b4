/**
 * Instruction builders for payment_ledger, encoded by Anchor from the IDL (`program.methods`
 * with every account given explicitly, so building an instruction never touches the network).
 * Money and ids are bigint here; they become BN only at the Anchor boundary.
 */
import anchor, { Program, type Provider } from "@coral-xyz/anchor";
import { getAssociatedTokenAddressSync, TOKEN_PROGRAM_ID } from "@solana/spl-token";
import { type Connection, type PublicKey, SystemProgram, type TransactionInstruction } from "@solana/web3.js";
import { ENDPOINT_HASH_BYTES } from "./endpoint-hash.js";
import { type AnchorEnum, type Protocol, type Rail, toAnchorEnum } from "./enums.js";
import { PAYMENT_LEDGER_IDL, PAYMENT_LEDGER_PROGRAM_ID } from "./idl.js";
import { configPda, eventAuthorityPda, invocationPda, payerStatePda, SIGNATURE_BYTES } from "./pda.js";

// bn.js is CommonJS; Node's ESM loader does not expose it as a named export of anchor.
const { BN } = anchor;
type BN = InstanceType<typeof BN>;

export const U64_MAX = (1n << 64n) - 1n;

/** `accountsStrict` never resolves accounts, so the provider is never asked for a connection. */
const offlineProvider: Provider = {
  get connection(): Connection {
    throw new Error("payment_ledger instruction builders are offline: no connection expected");
  },
};

/**
 * The shape of `program.methods` for this IDL. The IDL is imported as JSON, whose types are too
 * wide for Anchor to infer it, so the three instructions are described once here; the unit tests
 * decode what these builders encode to prove the description matches the IDL.
 */
interface StrictBuilder<Accounts> {
  accountsStrict(accounts: Accounts): { instruction(): Promise<TransactionInstruction> };
}
type Optional = PublicKey | null;
interface EventCpiAccounts {
  eventAuthority: PublicKey;
  program: PublicKey;
}
interface LedgerMethods {
  initialize(args: {
    treasury: PublicKey;
  }): StrictBuilder<{ authority: PublicKey; config: PublicKey; settlementMint: PublicKey; systemProgram: PublicKey } & EventCpiAccounts>;
  recordPayment(args: {
    paymentId: BN;
    amount: BN;
    protocol: AnchorEnum;
    rail: AnchorEnum;
    endpointHash: number[];
    settlementReference: number[] | null;
  }): StrictBuilder<
    {
      authority: PublicKey;
      payer: PublicKey;
      payee: PublicKey;
      config: PublicKey;
      payerState: PublicKey;
      invocation: Optional;
      mint: Optional;
      payerToken: Optional;
      payeeToken: Optional;
      tokenProgram: Optional;
      systemProgram: PublicKey;
    } & EventCpiAccounts
  >;
  recordAttestedPayment(args: {
    paymentId: BN;
    amount: BN;
    protocol: AnchorEnum;
    endpointHash: number[];
    settlementReference: number[];
  }): StrictBuilder<
    {
      authority: PublicKey;
      payer: PublicKey;
      payee: PublicKey;
      config: PublicKey;
      payerState: PublicKey;
      systemProgram: PublicKey;
    } & EventCpiAccounts
  >;
  openInvocation(args: { parentSignature: number[]; subAgent: PublicKey; budget: BN }): StrictBuilder<
    {
      authority: PublicKey;
      invoker: PublicKey;
      config: PublicKey;
      invocation: PublicKey;
      systemProgram: PublicKey;
    } & EventCpiAccounts
  >;
}

const methods = new Program(PAYMENT_LEDGER_IDL, offlineProvider).methods as unknown as LedgerMethods;

function u64(value: bigint, what: string): BN {
  if (value < 0n || value > U64_MAX) {
    throw new RangeError(`${what} must fit in a u64, got ${value}`);
  }
  return new BN(value.toString());
}

function fixedBytes(bytes: Uint8Array, length: number, what: string): number[] {
  if (bytes.length !== length) {
    throw new RangeError(`${what} must be ${length} bytes, got ${bytes.length}`);
  }
  return Array.from(bytes);
}

/** Event-CPI accounts every instruction of the program carries (Anchor `#[event_cpi]`). */
function eventCpiAccounts(): { eventAuthority: PublicKey; program: PublicKey } {
  return { eventAuthority: eventAuthorityPda().address, program: PAYMENT_LEDGER_PROGRAM_ID };
}

export interface InitializeInput {
  readonly authority: PublicKey;
  readonly settlementMint: PublicKey;
  readonly treasury: PublicKey;
}

export async function initializeInstruction(input: InitializeInput): Promise<TransactionInstruction> {
  return methods
    .initialize({ treasury: input.treasury })
    .accountsStrict({
      authority: input.authority,
      config: configPda().address,
      settlementMint: input.settlementMint,
      systemProgram: SystemProgram.programId,
      ...eventCpiAccounts(),
    })
    .instruction();
}

/** The token accounts the program moves funds between on the atomic stablecoin rail. */
export interface TransferAccounts {
  readonly mint: PublicKey;
  readonly payerToken: PublicKey;
  readonly payeeToken: PublicKey;
  readonly tokenProgram: PublicKey;
}

/** Associated token accounts of payer and payee for `mint` under the classic SPL Token program. */
export function associatedTransferAccounts(payer: PublicKey, payee: PublicKey, mint: PublicKey): TransferAccounts {
  return {
    mint,
    payerToken: getAssociatedTokenAddressSync(mint, payer, true),
    payeeToken: getAssociatedTokenAddressSync(mint, payee, true),
    tokenProgram: TOKEN_PROGRAM_ID,
  };
}

export interface RecordPaymentInput {
  /** The service key (`config.authority`): signs, pays fees and the payer state's rent. */
  readonly authority: PublicKey;
  /** The agent wallet that pays; signs too. */
  readonly payer: PublicKey;
  readonly payee: PublicKey;
  /** Unique per payer, from 1, allocated in increasing order. */
  readonly paymentId: bigint;
  readonly amountUnits: bigint;
  readonly protocol: Protocol;
  readonly rail: Rail;
  readonly endpointHash: Uint8Array;
  /** Signature of a separate settlement transaction (third-party x402 facilitator). */
  readonly settlementReference?: Uint8Array | null;
  /** The invocation account when paying under an `agents.invoke` budget. */
  readonly invocation?: PublicKey | null;
  /** Needed on the stablecoin rail without settlement reference: the program moves the tokens. */
  readonly transfer?: TransferAccounts | null;
}

export async function recordPaymentInstruction(input: RecordPaymentInput): Promise<TransactionInstruction> {
  const transfer = input.transfer ?? null;
  const settlementReference = input.settlementReference ?? null;
  return methods
    .recordPayment({
      paymentId: u64(input.paymentId, "payment id"),
      amount: u64(input.amountUnits, "amount"),
      protocol: toAnchorEnum(input.protocol),
      rail: toAnchorEnum(input.rail),
      endpointHash: fixedBytes(input.endpointHash, ENDPOINT_HASH_BYTES, "endpoint hash"),
      settlementReference: settlementReference === null ? null : fixedBytes(settlementReference, SIGNATURE_BYTES, "settlement reference"),
    })
    .accountsStrict({
      authority: input.authority,
      payer: input.payer,
      payee: input.payee,
      config: configPda().address,
      payerState: payerStatePda(input.payer).address,
      invocation: input.invocation ?? null,
      mint: transfer?.mint ?? null,
      payerToken: transfer?.payerToken ?? null,
      payeeToken: transfer?.payeeToken ?? null,
      tokenProgram: transfer?.tokenProgram ?? null,
      systemProgram: SystemProgram.programId,
      ...eventCpiAccounts(),
    })
    .instruction();
}

export interface RecordAttestedPaymentInput {
  /** The service key (`config.authority`): the only signer; pays the fee and the payer state's rent. */
  readonly authority: PublicKey;
  /** The wallet that signed the referenced transfer (not a signer of the record). */
  readonly payer: PublicKey;
  readonly payee: PublicKey;
  /** Unique per payer, from 1; the payer's replay window is shared with `record_payment`. */
  readonly paymentId: bigint;
  readonly amountUnits: bigint;
  readonly protocol: Protocol;
  readonly endpointHash: Uint8Array;
  /** Signature of the settlement transaction that moved the tokens (64 bytes, never all zero). */
  readonly settlementReference: Uint8Array;
}

/**
 * `record_attested_payment`: the authority alone records a payment a wallet the gateway does not
 * hold made in its own transaction (an x402 `exact` or MPP `solana` charge the gateway co-signed
 * as fee payer). Stablecoin rail, nothing moves; the indexer verifies the referenced transfer.
 */
export async function recordAttestedPaymentInstruction(input: RecordAttestedPaymentInput): Promise<TransactionInstruction> {
  return methods
    .recordAttestedPayment({
      paymentId: u64(input.paymentId, "payment id"),
      amount: u64(input.amountUnits, "amount"),
      protocol: toAnchorEnum(input.protocol),
      endpointHash: fixedBytes(input.endpointHash, ENDPOINT_HASH_BYTES, "endpoint hash"),
      settlementReference: fixedBytes(input.settlementReference, SIGNATURE_BYTES, "settlement reference"),
    })
    .accountsStrict({
      authority: input.authority,
      payer: input.payer,
      payee: input.payee,
      config: configPda().address,
      payerState: payerStatePda(input.payer).address,
      systemProgram: SystemProgram.programId,
      ...eventCpiAccounts(),
    })
    .instruction();
}

export interface OpenInvocationInput {
  readonly authority: PublicKey;
  /** The orchestrating agent; signs. */
  readonly invoker: PublicKey;
  /** Signature of the invoking transaction: the parent of every payment under the invocation. */
  readonly parentSignature: Uint8Array;
  readonly subAgent: PublicKey;
  readonly budgetUnits: bigint;
}

export async function openInvocationInstruction(input: OpenInvocationInput): Promise<TransactionInstruction> {
  return methods
    .openInvocation({
      parentSignature: fixedBytes(input.parentSignature, SIGNATURE_BYTES, "parent signature"),
      subAgent: input.subAgent,
      budget: u64(input.budgetUnits, "budget"),
    })
    .accountsStrict({
      authority: input.authority,
      invoker: input.invoker,
      config: configPda().address,
      invocation: invocationPda(input.parentSignature, input.subAgent).address,
      systemProgram: SystemProgram.programId,
      ...eventCpiAccounts(),
    })
    .instruction();
}
