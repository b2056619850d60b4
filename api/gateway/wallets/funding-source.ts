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
import { PaymentError, PaymentPendingError } from "../chain/errors.js";
import { type LocalLedger, recentBlockhash, type SettlementLedger, signTransaction, submit, walletOperationMemo } from "../chain/ledger.js";

export interface FundingResult {
  readonly txHash: string;
}

export interface FundingRequest {
  /**
   * The wallet operation this funding is (its row id). A source puts it in what it sends (the
   * local treasury: a memo), so two identical fundings are never one transaction, and a source
   * that keys its payouts by it can be asked about one after a crash.
   */
  readonly operationId: string;
  /**
   * Called with the transaction's signature and last valid block height once it is signed and
   * BEFORE it is sent: the operation row stores them, so an unknown outcome (a timeout, a crash)
   * is resolved by looking the signature up on the chain. If it throws, nothing may be sent.
   */
  readonly recordSigned?: (signed: { signature: string; lastValidBlockHeight: number }) => Promise<void>;
}

export interface FundingSource {
  /**
   * Moves `units` of the settlement mint to `to` (a wallet owner address); resolves once
   * confirmed. Throws `PaymentPendingError` when the transaction was (or may have been) sent and
   * its outcome is not known yet, and `PaymentError` only when it definitely moved nothing
   * (refused before it was sent, landed with an error, or expired).
   */
  fund(to: PublicKey, units: bigint, request: FundingRequest): Promise<FundingResult>;
}

/** The treasury's TransferChecked to `to`'s token account (created if missing), tagged with the operation. */
export function treasuryFundingTransaction(
  ledger: SettlementLedger,
  treasury: PublicKey,
  treasuryToken: PublicKey,
  to: PublicKey,
  units: bigint,
  operationId: string,
): Transaction {
  const { mint, decimals } = ledger;
  const tokenAccount = getAssociatedTokenAddressSync(mint, to, true);
  return new Transaction().add(
    createAssociatedTokenAccountIdempotentInstruction(treasury, tokenAccount, to, mint),
    createTransferCheckedInstruction(treasuryToken, mint, tokenAccount, treasury, units, decimals),
    walletOperationMemo(operationId),
  );
}

export class LocalTreasuryFundingSource implements FundingSource {
  constructor(
    private readonly ledger: SettlementLedger,
    private readonly treasury: Keypair,
    private readonly treasuryToken: PublicKey,
  ) {}

  static fromLocalnet(ledger: SettlementLedger, localnet: LocalLedger): LocalTreasuryFundingSource {
    return new LocalTreasuryFundingSource(ledger, localnet.keypairs.treasury, localnet.info.treasuryToken);
  }

  async fund(to: PublicKey, units: bigint, request: FundingRequest): Promise<FundingResult> {
    const transaction = treasuryFundingTransaction(
      this.ledger,
      this.treasury.publicKey,
      this.treasuryToken,
      to,
      units,
      request.operationId,
    );
    let blockhash;
    try {
      blockhash = await recentBlockhash(this.ledger);
    } catch (error) {
      throw new PaymentError(`treasury funding not sent: ${(error as Error).message}`, {}, { cause: error });
    }
    // The treasury pays its own fees here: funding does not spend the service authority's SOL.
    const signed = signTransaction({ ...this.ledger, authority: this.treasury }, transaction, blockhash, []);
    await request.recordSigned?.(signed);
    const result = await submit(this.ledger, signed);
    if (result.status === "confirmed") return { txHash: signed.signature };
    if (result.status === "pending") throw new PaymentPendingError(signed.signature);
    const detail = { signature: signed.signature };
    if (result.status === "rejected") {
      // The RPC node refused it before forwarding (preflight): it cannot land.
      const error = result.error as Error;
      throw new PaymentError(`treasury funding refused: ${error.message}`, detail, { cause: error });
    }
    throw new PaymentError(`treasury funding ${signed.signature} failed (${result.reason})`, detail);
  }
}
