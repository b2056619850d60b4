/**
 * Agent and service wallets on a local ledger: a fresh keypair with SOL from an airdrop, an
 * associated token account of the settlement mint, and USDC moved from the treasury by a real
 * SPL Token transfer. Used by the integration tests, the benches and demo traffic.
 */
import { AnchorProvider, Wallet } from "@coral-xyz/anchor";
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from "@solana/spl-token";
import { Connection, Keypair, LAMPORTS_PER_SOL, type PublicKey, Transaction } from "@solana/web3.js";
import { associatedTransferAccounts, type RecordPaymentInput, recordPaymentInstruction } from "../programs/payment_ledger/ts/index.js";
import type { Localnet, LocalnetInfo, LocalnetKeypairs } from "./localnet.js";

export interface AgentWallet {
  readonly keypair: Keypair;
  readonly publicKey: PublicKey;
  /** Its associated token account of the settlement mint. */
  readonly tokenAccount: PublicKey;
}

export interface WalletOptions {
  readonly airdropLamports?: number;
  /** USDC base units moved from the treasury; 0 leaves the token account empty. */
  readonly usdcUnits?: bigint;
}

export interface LedgerAccess {
  /** Its wallet must be the ledger's authority (it pays fees and the token account rent). */
  readonly provider: AnchorProvider;
  readonly info: LocalnetInfo;
  readonly keypairs: LocalnetKeypairs;
}

export async function airdrop(provider: AnchorProvider, to: PublicKey, lamports: number): Promise<void> {
  const { connection } = provider;
  const signature = await connection.requestAirdrop(to, lamports);
  const latest = await connection.getLatestBlockhash("confirmed");
  const result = await connection.confirmTransaction({ signature, ...latest }, "confirmed");
  if (result.value.err !== null) throw new Error(`airdrop ${signature} failed: ${JSON.stringify(result.value.err)}`);
}

/** Moves `units` of the settlement mint from the treasury, signed by the treasury. */
export function treasuryTransfer(ledger: LedgerAccess, to: PublicKey, units: bigint): Transaction {
  const { info, keypairs } = ledger;
  return new Transaction().add(
    createTransferCheckedInstruction(info.treasuryToken, info.mint, to, keypairs.treasury.publicKey, units, info.decimals),
  );
}

export async function createAgentWallet(ledger: LedgerAccess, options: WalletOptions = {}): Promise<AgentWallet> {
  const { provider, info, keypairs } = ledger;
  const keypair = Keypair.generate();
  const tokenAccount = getAssociatedTokenAddressSync(info.mint, keypair.publicKey);
  const airdropLamports = options.airdropLamports ?? LAMPORTS_PER_SOL;
  if (airdropLamports > 0) await airdrop(provider, keypair.publicKey, airdropLamports);

  const setup = new Transaction().add(
    createAssociatedTokenAccountIdempotentInstruction(provider.wallet.publicKey, tokenAccount, keypair.publicKey, info.mint),
  );
  const signers: Keypair[] = [];
  const usdcUnits = options.usdcUnits ?? 0n;
  if (usdcUnits > 0n) {
    setup.add(...treasuryTransfer(ledger, tokenAccount, usdcUnits).instructions);
    signers.push(keypairs.treasury);
  }
  await provider.sendAndConfirm(setup, signers);
  return { keypair, publicKey: keypair.publicKey, tokenAccount };
}

export async function tokenBalanceUnits(provider: AnchorProvider, tokenAccount: PublicKey): Promise<bigint> {
  const balance = await provider.connection.getTokenAccountBalance(tokenAccount, "confirmed");
  return BigInt(balance.value.amount);
}

/** Anchor access to a running local ledger, signing as its authority, at `confirmed`. */
export function ledgerAccess(localnet: Localnet): LedgerAccess {
  const connection = new Connection(localnet.rpcUrl, { commitment: "confirmed", wsEndpoint: localnet.wsUrl });
  const provider = new AnchorProvider(connection, new Wallet(localnet.keypairs.authority), {
    commitment: "confirmed",
    preflightCommitment: "confirmed",
  });
  return { provider, info: localnet.info, keypairs: localnet.keypairs };
}

/** What a payment is, without who signs it. */
export type PaymentTerms = Omit<RecordPaymentInput, "programId" | "authority" | "payer" | "payee">;

/**
 * Records a payment from `payer` to `payee` through the program, signed by the ledger authority
 * and the payer; on the stablecoin rail without settlement reference the program moves the tokens.
 */
export async function recordPayment(
  ledger: LedgerAccess,
  payer: AgentWallet,
  payee: AgentWallet,
  terms: PaymentTerms,
  invocation?: PublicKey,
): Promise<string> {
  const atomic = terms.rail === "stablecoin" && (terms.settlementReference ?? null) === null;
  const instruction = await recordPaymentInstruction({
    ...terms,
    programId: ledger.info.programId,
    authority: ledger.info.authority,
    payer: payer.publicKey,
    payee: payee.publicKey,
    invocation: invocation ?? null,
    transfer: atomic ? associatedTransferAccounts(payer.publicKey, payee.publicKey, ledger.info.mint) : null,
  });
  return ledger.provider.sendAndConfirm(new Transaction().add(instruction), [payer.keypair], { commitment: "confirmed" });
}
