/**
 * Instruction builders for payment_ledger, encoded by Anchor from the IDL (`program.methods`
 * with every account given explicitly, so building an instruction never touches the network).
 * Every builder takes the program's address (configuration's PROGRAM_ID): the instruction's
 * program, its PDAs and its event-CPI accounts all derive from it, so a program deployed at
 * another address than the IDL's is driven the same way. Money and ids are bigint here; they
 * become BN only at the Anchor boundary.
 */
import anchor, { Program, type Provider } from "@coral-xyz/anchor";
import { getAssociatedTokenAddressSync, TOKEN_PROGRAM_ID } from "@solana/spl-token";
import { type Connection, type PublicKey, SystemProgram, SYSVAR_INSTRUCTIONS_PUBKEY, type TransactionInstruction } from "@solana/web3.js";
import { ENDPOINT_HASH_BYTES } from "./endpoint-hash.js";
import { type AnchorEnum, type Protocol, type Rail, toAnchorEnum } from "./enums.js";
import { PAYMENT_LEDGER_IDL } from "./idl.js";
import {
  CHANNEL_ID_BYTES,
  channelPda,
  configPda,
  escrowPda,
  eventAuthorityPda,
  invocationPda,
  payerStatePda,
  SIGNATURE_BYTES,
} from "./pda.js";
import type { ChannelCharge } from "./voucher.js";

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
 * wide for Anchor to infer it, so the instructions are described once here; the unit tests
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
  openChannel(args: { channelId: number[]; deposit: BN; expiresAt: BN; withdrawDelay: BN; protocol: AnchorEnum }): StrictBuilder<
    {
      authority: PublicKey;
      payer: PublicKey;
      payee: PublicKey;
      config: PublicKey;
      mint: PublicKey;
      payerToken: PublicKey;
      channel: PublicKey;
      escrow: PublicKey;
      invocation: Optional;
      tokenProgram: PublicKey;
      systemProgram: PublicKey;
    } & EventCpiAccounts
  >;
  topUpChannel(amount: BN): StrictBuilder<
    {
      payer: PublicKey;
      channel: PublicKey;
      escrow: PublicKey;
      mint: PublicKey;
      payerToken: PublicKey;
      invocation: Optional;
      tokenProgram: PublicKey;
    } & EventCpiAccounts
  >;
  settleChannel(args: AnchorSettlement): StrictBuilder<{ settler: PublicKey } & SettlementAccounts>;
  closeChannel(finalSettlement: AnchorSettlement | null): StrictBuilder<{ signer: PublicKey } & SettlementAccounts>;
  refundChannel(): StrictBuilder<FinishAccounts>;
  forceCloseChannel(): StrictBuilder<FinishAccounts>;
}
interface AnchorSettlement {
  cumulativeAmount: BN;
  sequence: BN;
  endpoints: number[][];
  charges: { paymentId: BN; amount: BN; endpoint: number }[];
}
type SettlementAccounts = {
  config: PublicKey;
  channel: PublicKey;
  escrow: PublicKey;
  mint: PublicKey;
  payeeToken: PublicKey;
  invocation: Optional;
  tokenProgram: PublicKey;
  instructions: PublicKey;
} & EventCpiAccounts;
type FinishAccounts = {
  signer: PublicKey;
  config: PublicKey;
  channel: PublicKey;
  escrow: PublicKey;
  mint: PublicKey;
  payerToken: PublicKey;
  rentPayer: PublicKey;
  tokenProgram: PublicKey;
} & EventCpiAccounts;

/** One Anchor `Program` per address, its IDL's `address` replaced (Anchor encodes `programId` from it). */
const programs = new Map<string, LedgerMethods>();

function methodsOf(programId: PublicKey): LedgerMethods {
  const address = programId.toBase58();
  let methods = programs.get(address);
  if (methods === undefined) {
    methods = new Program({ ...PAYMENT_LEDGER_IDL, address }, offlineProvider).methods as unknown as LedgerMethods;
    programs.set(address, methods);
  }
  return methods;
}

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
function eventCpiAccounts(programId: PublicKey): { eventAuthority: PublicKey; program: PublicKey } {
  return { eventAuthority: eventAuthorityPda(programId).address, program: programId };
}

export interface InitializeInput {
  /** The program's address (PROGRAM_ID). */
  readonly programId: PublicKey;
  readonly authority: PublicKey;
  readonly settlementMint: PublicKey;
  readonly treasury: PublicKey;
}

export async function initializeInstruction(input: InitializeInput): Promise<TransactionInstruction> {
  return methodsOf(input.programId)
    .initialize({ treasury: input.treasury })
    .accountsStrict({
      authority: input.authority,
      config: configPda(input.programId).address,
      settlementMint: input.settlementMint,
      systemProgram: SystemProgram.programId,
      ...eventCpiAccounts(input.programId),
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
  /** The program's address (PROGRAM_ID). */
  readonly programId: PublicKey;
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
  return methodsOf(input.programId)
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
      config: configPda(input.programId).address,
      payerState: payerStatePda(input.payer, input.programId).address,
      invocation: input.invocation ?? null,
      mint: transfer?.mint ?? null,
      payerToken: transfer?.payerToken ?? null,
      payeeToken: transfer?.payeeToken ?? null,
      tokenProgram: transfer?.tokenProgram ?? null,
      systemProgram: SystemProgram.programId,
      ...eventCpiAccounts(input.programId),
    })
    .instruction();
}

export interface RecordAttestedPaymentInput {
  /** The program's address (PROGRAM_ID). */
  readonly programId: PublicKey;
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
  return methodsOf(input.programId)
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
      config: configPda(input.programId).address,
      payerState: payerStatePda(input.payer, input.programId).address,
      systemProgram: SystemProgram.programId,
      ...eventCpiAccounts(input.programId),
    })
    .instruction();
}

export interface OpenInvocationInput {
  /** The program's address (PROGRAM_ID). */
  readonly programId: PublicKey;
  readonly authority: PublicKey;
  /** The orchestrating agent; signs. */
  readonly invoker: PublicKey;
  /** Signature of the invoking transaction: the parent of every payment under the invocation. */
  readonly parentSignature: Uint8Array;
  readonly subAgent: PublicKey;
  readonly budgetUnits: bigint;
}

export async function openInvocationInstruction(input: OpenInvocationInput): Promise<TransactionInstruction> {
  return methodsOf(input.programId)
    .openInvocation({
      parentSignature: fixedBytes(input.parentSignature, SIGNATURE_BYTES, "parent signature"),
      subAgent: input.subAgent,
      budget: u64(input.budgetUnits, "budget"),
    })
    .accountsStrict({
      authority: input.authority,
      invoker: input.invoker,
      config: configPda(input.programId).address,
      invocation: invocationPda(input.parentSignature, input.subAgent, input.programId).address,
      systemProgram: SystemProgram.programId,
      ...eventCpiAccounts(input.programId),
    })
    .instruction();
}

// ---- payment channels ----------------------------------------------------------------------------

/** Everything that names one channel; `channelAccounts` derives the addresses. */
export interface ChannelAccounts {
  /** The program's address (PROGRAM_ID): channel and escrow derive from it. */
  readonly programId: PublicKey;
  readonly payer: PublicKey;
  readonly payee: PublicKey;
  readonly mint: PublicKey;
  readonly channelId: Uint8Array;
  readonly channel: PublicKey;
  readonly escrow: PublicKey;
  /** The token program of mint and escrow (classic SPL Token unless given). */
  readonly tokenProgram: PublicKey;
}

export function channelAccounts(input: {
  programId: PublicKey;
  payer: PublicKey;
  payee: PublicKey;
  mint: PublicKey;
  channelId: Uint8Array;
  tokenProgram?: PublicKey;
}): ChannelAccounts {
  const channel = channelPda(input.payer, input.payee, input.channelId, input.programId).address;
  return {
    programId: input.programId,
    payer: input.payer,
    payee: input.payee,
    mint: input.mint,
    channelId: Uint8Array.from(input.channelId),
    channel,
    escrow: escrowPda(channel, input.programId).address,
    tokenProgram: input.tokenProgram ?? TOKEN_PROGRAM_ID,
  };
}

function ata(owner: PublicKey, channel: ChannelAccounts): PublicKey {
  return getAssociatedTokenAddressSync(channel.mint, owner, true, channel.tokenProgram);
}

export interface OpenChannelInput {
  /** The service key: co-signs and pays the rent of channel and escrow. */
  readonly authority: PublicKey;
  readonly channel: ChannelAccounts;
  readonly depositUnits: bigint;
  /** Unix seconds; the payer may force-close from then on. */
  readonly expiresAt: bigint;
  /** Seconds between a close request and the payer's refund (1 s to 30 days). */
  readonly withdrawDelaySeconds: bigint;
  readonly protocol: Protocol;
  /** The payer's token account the deposit leaves (its associated account unless given). */
  readonly payerToken?: PublicKey;
  /** Charges of the channel are made under this `agents.invoke` budget. */
  readonly invocation?: PublicKey | null;
}

function i64(value: bigint, what: string): BN {
  if (value < -(1n << 63n) || value >= 1n << 63n) throw new RangeError(`${what} must fit in an i64, got ${value}`);
  return new BN(value.toString());
}

/** `open_channel`: signed by the authority and the payer (whose tokens move into the escrow). */
export async function openChannelInstruction(input: OpenChannelInput): Promise<TransactionInstruction> {
  const { channel } = input;
  return methodsOf(channel.programId)
    .openChannel({
      channelId: fixedBytes(channel.channelId, CHANNEL_ID_BYTES, "channel id"),
      deposit: u64(input.depositUnits, "deposit"),
      expiresAt: i64(input.expiresAt, "expiry"),
      withdrawDelay: i64(input.withdrawDelaySeconds, "withdraw delay"),
      protocol: toAnchorEnum(input.protocol),
    })
    .accountsStrict({
      authority: input.authority,
      payer: channel.payer,
      payee: channel.payee,
      config: configPda(channel.programId).address,
      mint: channel.mint,
      payerToken: input.payerToken ?? ata(channel.payer, channel),
      channel: channel.channel,
      escrow: channel.escrow,
      invocation: input.invocation ?? null,
      tokenProgram: channel.tokenProgram,
      systemProgram: SystemProgram.programId,
      ...eventCpiAccounts(channel.programId),
    })
    .instruction();
}

/** `top_up_channel`: signed by the payer. */
export async function topUpChannelInstruction(input: {
  channel: ChannelAccounts;
  amountUnits: bigint;
  payerToken?: PublicKey;
  invocation?: PublicKey | null;
}): Promise<TransactionInstruction> {
  const { channel } = input;
  return methodsOf(channel.programId)
    .topUpChannel(u64(input.amountUnits, "amount"))
    .accountsStrict({
      payer: channel.payer,
      channel: channel.channel,
      escrow: channel.escrow,
      mint: channel.mint,
      payerToken: input.payerToken ?? ata(channel.payer, channel),
      invocation: input.invocation ?? null,
      tokenProgram: channel.tokenProgram,
      ...eventCpiAccounts(channel.programId),
    })
    .instruction();
}

/** A voucher and the charges it adds to the channel's last settled state. */
export interface ChannelSettlement {
  readonly cumulativeUnits: bigint;
  readonly sequence: bigint;
  /** In order; ids strictly increasing, amounts summing to cumulative minus settled. */
  readonly charges: readonly ChannelCharge[];
}

/** The most endpoints one settlement can name (a charge carries a one-byte index). */
export const MAX_SETTLEMENT_ENDPOINTS = 256;

/** The program's encoding: each distinct endpoint hash once, charges pointing at it by index. */
function anchorSettlement(settlement: ChannelSettlement): AnchorSettlement {
  const endpoints: string[] = [];
  const charges = settlement.charges.map((charge) => {
    const hex = Buffer.from(fixedBytes(charge.endpointHash, ENDPOINT_HASH_BYTES, "endpoint hash")).toString("hex");
    let index = endpoints.indexOf(hex);
    if (index < 0) {
      if (endpoints.length === MAX_SETTLEMENT_ENDPOINTS) {
        throw new RangeError(`a settlement names at most ${MAX_SETTLEMENT_ENDPOINTS} endpoints`);
      }
      index = endpoints.push(hex) - 1;
    }
    return { paymentId: u64(charge.paymentId, "payment id"), amount: u64(charge.amountUnits, "amount"), endpoint: index };
  });
  return {
    cumulativeAmount: u64(settlement.cumulativeUnits, "cumulative amount"),
    sequence: u64(settlement.sequence, "sequence"),
    endpoints: endpoints.map((hex) => Array.from(Buffer.from(hex, "hex"))),
    charges,
  };
}

function settlementAccounts(channel: ChannelAccounts, payeeToken: PublicKey | undefined, invocation: PublicKey | null | undefined) {
  return {
    config: configPda(channel.programId).address,
    channel: channel.channel,
    escrow: channel.escrow,
    mint: channel.mint,
    payeeToken: payeeToken ?? ata(channel.payee, channel),
    invocation: invocation ?? null,
    tokenProgram: channel.tokenProgram,
    instructions: SYSVAR_INSTRUCTIONS_PUBKEY,
    ...eventCpiAccounts(channel.programId),
  };
}

export interface SettleChannelInput {
  /** The payee, or the service authority acting for it; signs. */
  readonly settler: PublicKey;
  readonly channel: ChannelAccounts;
  readonly settlement: ChannelSettlement;
  /** The payee's token account receiving the delta (its associated account unless given). */
  readonly payeeToken?: PublicKey;
  /** Required when the channel was opened under an invocation. */
  readonly invocation?: PublicKey | null;
}

/**
 * `settle_channel`. The transaction must carry `voucherSignatureInstruction` (voucher.ts) for the
 * same voucher immediately before this instruction.
 */
export async function settleChannelInstruction(input: SettleChannelInput): Promise<TransactionInstruction> {
  return methodsOf(input.channel.programId)
    .settleChannel(anchorSettlement(input.settlement))
    .accountsStrict({ settler: input.settler, ...settlementAccounts(input.channel, input.payeeToken, input.invocation) })
    .instruction();
}

/**
 * `close_channel`: a close request by the payer, the payee or the authority; with a final
 * settlement (payee or authority only) the voucher's signature instruction must precede it.
 */
export async function closeChannelInstruction(input: {
  signer: PublicKey;
  channel: ChannelAccounts;
  finalSettlement?: ChannelSettlement | null;
  payeeToken?: PublicKey;
  invocation?: PublicKey | null;
}): Promise<TransactionInstruction> {
  const finalSettlement = input.finalSettlement ?? null;
  return methodsOf(input.channel.programId)
    .closeChannel(finalSettlement === null ? null : anchorSettlement(finalSettlement))
    .accountsStrict({ signer: input.signer, ...settlementAccounts(input.channel, input.payeeToken, input.invocation) })
    .instruction();
}

interface FinishInput {
  readonly signer: PublicKey;
  readonly channel: ChannelAccounts;
  /** The channel's rent payer (the service authority that opened it). */
  readonly rentPayer: PublicKey;
  /**
   * The account receiving the refund: the payer's associated token account unless given. The
   * program refuses any other (`RefundNotToPayerAssociatedAccount`).
   */
  readonly payerToken?: PublicKey;
}

function finishAccounts(input: FinishInput): FinishAccounts {
  const { channel } = input;
  return {
    signer: input.signer,
    config: configPda(channel.programId).address,
    channel: channel.channel,
    escrow: channel.escrow,
    mint: channel.mint,
    payerToken: input.payerToken ?? ata(channel.payer, channel),
    rentPayer: input.rentPayer,
    tokenProgram: channel.tokenProgram,
    ...eventCpiAccounts(channel.programId),
  };
}

/** `refund_channel`: after a close request; the payee at once, the payer or the authority once the withdraw delay has passed. */
export async function refundChannelInstruction(input: FinishInput): Promise<TransactionInstruction> {
  return methodsOf(input.channel.programId).refundChannel().accountsStrict(finishAccounts(input)).instruction();
}

/** `force_close_channel`: the payer, after the channel's expiry. */
export async function forceCloseChannelInstruction(input: FinishInput): Promise<TransactionInstruction> {
  return methodsOf(input.channel.programId).forceCloseChannel().accountsStrict(finishAccounts(input)).instruction();
}

/**
 * Compute units to request for a settlement of `chargeCount` charges on the local ledger, where
 * every entry of the native program (the settlement and each event it emits) is charged a flat
 * 20,000 units (docs/ledger.md); the default 200,000 per instruction covers up to 8 charges.
 */
export function settlementComputeUnits(chargeCount: number): number {
  return 20_000 * (chargeCount + 2) + 10_000;
}
