/**
 * Where `wallet.fund` takes money from (spec 4: "the account's linked funding source"). The
 * gateway only needs "move `units` of the settlement mint to this wallet and tell me the
 * transaction"; how the money gets there is the source's business.
 *
 * The local stand-in is the localnet treasury: a keypair holding the mint's supply, which signs
 * an SPL Token TransferChecked into the agent's associated token account (created if missing,
 * rent paid by the treasury). A production source would be an on-ramp or a custodial treasury
 * (e.g. a Circle/Coinbase account paying out USDC to the address) whose answer is asynchronous.
 */
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from "@solana/spl-token";
import { type Keypair, type PublicKey, Transaction } from "@solana/web3.js";
import type { Localnet } from "../../scripts/localnet.js";
import { PaymentError, PaymentPendingError } from "./errors.js";
import { awaitOutcome, COMMITMENT, type SettlementLedger, signTransaction } from "./ledger.js";

export interface FundingResult {
  readonly txHash: string;
}

export interface FundingSource {
  /** Moves `units` of the settlement mint to `to` (a wallet owner address); resolves once confirmed. */
  fund(to: PublicKey, units: bigint): Promise<FundingResult>;
}

export class LocalTreasuryFundingSource implements FundingSource {
  constructor(
    private readonly ledger: SettlementLedger,
    private readonly treasury: Keypair,
    private readonly treasuryToken: PublicKey,
  ) {}

  static fromLocalnet(ledger: SettlementLedger, localnet: Localnet): LocalTreasuryFundingSource {
    return new LocalTreasuryFundingSource(ledger, localnet.keypairs.treasury, localnet.info.treasuryToken);
  }

  async fund(to: PublicKey, units: bigint): Promise<FundingResult> {
    const { mint, decimals, connection } = this.ledger;
    const tokenAccount = getAssociatedTokenAddressSync(mint, to, true);
    const payer = this.treasury.publicKey;
    const transaction = new Transaction().add(
      createAssociatedTokenAccountIdempotentInstruction(payer, tokenAccount, to, mint),
      createTransferCheckedInstruction(this.treasuryToken, mint, tokenAccount, payer, units, decimals),
    );
    // The treasury pays its own fees here: funding does not spend the service authority's SOL.
    const blockhash = await connection.getLatestBlockhash(COMMITMENT);
    transaction.feePayer = payer;
    const signed = signTransaction({ ...this.ledger, authority: this.treasury }, transaction, blockhash, []);
    try {
      await connection.sendRawTransaction(Buffer.from(signed.wire, "base64"), { preflightCommitment: COMMITMENT });
    } catch (error) {
      const detail = { signature: signed.signature };
      throw new PaymentError(`treasury funding failed: ${(error as Error).message}`, detail, { cause: error });
    }
    const outcome = await awaitOutcome(this.ledger, signed);
    if (outcome.status === "confirmed") return { txHash: signed.signature };
    if (outcome.status === "pending") throw new PaymentPendingError(signed.signature);
    throw new PaymentError(`treasury funding ${signed.signature} failed (${outcome.reason})`, { signature: signed.signature });
  }
}
