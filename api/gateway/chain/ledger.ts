/**
 * The chain as wallets and settlement see it: a connection, the settlement mint, and the service
 * authority (`config.authority` of payment_ledger), which co-signs every record and pays every fee
 * so agent wallets never need SOL. Plus the one way this module sends a transaction: signed
 * locally (so its signature is known and stored before it is sent), sent as raw bytes, and
 * resolved by looking its signature up until it lands or its blockhash can no longer land.
 */
import { readFile } from "node:fs/promises";
import { setTimeout as delay } from "node:timers/promises";
import { getAssociatedTokenAddressSync, unpackAccount } from "@solana/spl-token";
import {
  Connection,
  Keypair,
  PublicKey,
  SendTransactionError,
  type SignatureStatus,
  type Transaction,
  TransactionInstruction,
} from "@solana/web3.js";
import bs58 from "bs58";
import { InvalidAddressError, InvalidAmountUnitsError } from "./errors.js";

export interface SettlementLedger {
  readonly connection: Connection;
  readonly mint: PublicKey;
  readonly decimals: number;
  /** `config.authority`: co-signs record_payment / open_invocation, pays fees and rent. */
  readonly authority: Keypair;
  /** Spec 2.4 `network`: `solana-mainnet`, `solana-devnet`, `solana-localnet`. */
  readonly network: string;
  /** Where payment_ledger is deployed (PROGRAM_ID): every instruction, PDA and decoder uses it. */
  readonly programId: PublicKey;
}

export const COMMITMENT = "confirmed" as const;

/**
 * What a local ledger hands the gateway: its endpoints, its mint and the keypairs it created.
 * `scripts/localnet.ts`'s `Localnet` is one; production code never imports from `scripts/` (the
 * composition side), so it names only the shape it needs.
 */
export interface LocalLedger {
  readonly rpcUrl: string;
  readonly wsUrl: string;
  readonly info: { readonly programId: PublicKey; readonly mint: PublicKey; readonly decimals: number; readonly treasuryToken: PublicKey };
  readonly keypairs: { readonly authority: Keypair; readonly treasury: Keypair };
}

/** A local ledger (scripts/localnet.ts), signing with its authority keypair. */
export function localSettlementLedger(localnet: LocalLedger): SettlementLedger {
  return {
    connection: new Connection(localnet.rpcUrl, { commitment: COMMITMENT, wsEndpoint: localnet.wsUrl }),
    mint: localnet.info.mint,
    decimals: localnet.info.decimals,
    authority: localnet.keypairs.authority,
    network: "solana-localnet",
    programId: localnet.info.programId,
  };
}

/**
 * From configuration: `SOLANA_RPC_URL`, `SETTLEMENT_MINT`, `SETTLEMENT_MINT_DECIMALS` (default 6)
 * `LEDGER_AUTHORITY_KEYPAIR` (path of a Solana CLI keypair file; in production a KMS-backed
 * signer would replace the file), `PROGRAM_ID` and `SOLANA_NETWORK` (default `solana-devnet`).
 */
export async function settlementLedgerFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<SettlementLedger> {
  const need = (name: string): string => {
    const value = env[name];
    if (value === undefined || value === "") throw new Error(`${name} is not set`);
    return value;
  };
  const json: unknown = JSON.parse(await readFile(need("LEDGER_AUTHORITY_KEYPAIR"), "utf8"));
  if (!Array.isArray(json) || json.length !== 64) throw new Error("LEDGER_AUTHORITY_KEYPAIR: expected a JSON array of 64 bytes");
  const decimals = Number(env.SETTLEMENT_MINT_DECIMALS ?? "6");
  if (!Number.isInteger(decimals) || decimals < 0 || decimals > 18) throw new Error("SETTLEMENT_MINT_DECIMALS must be 0..18");
  return {
    connection: new Connection(need("SOLANA_RPC_URL"), { commitment: COMMITMENT }),
    mint: new PublicKey(need("SETTLEMENT_MINT")),
    decimals,
    authority: Keypair.fromSecretKey(Uint8Array.from(json as number[])),
    network: env.SOLANA_NETWORK ?? "solana-devnet",
    programId: new PublicKey(need("PROGRAM_ID")),
  };
}

/** A base58 ledger address, parsed once; `what` names it in the error. */
export function parseAddress(text: string, what = "address"): PublicKey {
  if (!/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(text)) throw new InvalidAddressError(text, `${what} is not base58`);
  let key: PublicKey;
  try {
    key = new PublicKey(text);
  } catch {
    throw new InvalidAddressError(text, `${what} is not a 32-byte base58 public key`);
  }
  if (key.equals(PublicKey.default)) throw new InvalidAddressError(text, `${what} is the all-zero address`);
  return key;
}

const U64_MAX = (1n << 64n) - 1n;

/** An amount the program accepts: positive and within a u64. */
export function checkAmountUnits(units: bigint): void {
  if (units <= 0n) throw new InvalidAmountUnitsError(units, "must be positive");
  if (units > U64_MAX) throw new InvalidAmountUnitsError(units, "must fit in a u64");
}

/** One token account of the settlement mint that a wallet owns. */
export interface WalletTokenAccount {
  readonly address: PublicKey;
  readonly units: bigint;
  /** The owner's associated token account: where payments are sent from and refunds go to. */
  readonly associated: boolean;
}

/**
 * Every token account of the settlement mint whose owner is `owner` (`getTokenAccountsByOwner`,
 * `confirmed`): its associated one and any other, which anyone may create for it without its
 * signature and fill. Sorted associated first, then by amount, largest first.
 */
export async function walletTokenAccounts(ledger: SettlementLedger, owner: PublicKey): Promise<WalletTokenAccount[]> {
  const associated = getAssociatedTokenAddressSync(ledger.mint, owner, true);
  const { value } = await ledger.connection.getTokenAccountsByOwner(owner, { mint: ledger.mint }, COMMITMENT);
  const accounts = value.map(({ pubkey, account }) => ({
    address: pubkey,
    units: unpackAccount(pubkey, account, account.owner).amount,
    associated: pubkey.equals(associated),
  }));
  return accounts.sort((a, b) =>
    a.associated !== b.associated ? (a.associated ? -1 : 1) : a.units > b.units ? -1 : a.units < b.units ? 1 : 0,
  );
}

/** What `owner` holds of the settlement mint: the sum over all its token accounts (0 with none). */
export async function heldBalanceUnits(ledger: SettlementLedger, owner: PublicKey): Promise<bigint> {
  return (await walletTokenAccounts(ledger, owner)).reduce((sum, account) => sum + account.units, 0n);
}

/**
 * Settlement-mint balance of `owner`'s associated token account (what a payment's transfer can
 * spend); 0 when it has none.
 */
export async function tokenBalanceUnits(ledger: SettlementLedger, owner: PublicKey): Promise<bigint> {
  const tokenAccount = getAssociatedTokenAddressSync(ledger.mint, owner, true);
  const info = await ledger.connection.getAccountInfo(tokenAccount, COMMITMENT);
  return info === null ? 0n : unpackAccount(tokenAccount, info, info.owner).amount;
}

// ---- a memo that makes each operation's transaction its own ----------------------------------

/**
 * SPL Memo v2. Every cluster and the local ledger (LiteSVM's default programs) load it at this
 * id (v1, `Memo1UhkJ...`, is the legacy one).
 */
export const MEMO_PROGRAM_ID = new PublicKey("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");

/**
 * A memo naming one wallet operation (`apg:wallet-operation:<id>`). Two operations with the same
 * payer, amount, destination and blockhash would otherwise build byte-identical transactions:
 * one signature for two rows, one transfer for two acknowledgements. With the operation id in
 * the message, each operation's signature is its own. No accounts: memo v2 then only logs it.
 */
export function walletOperationMemo(operationId: string): TransactionInstruction {
  if (!/^[0-9]{1,20}$/.test(operationId)) throw new Error(`wallet operation id ${JSON.stringify(operationId)} is not a row id`);
  return new TransactionInstruction({
    programId: MEMO_PROGRAM_ID,
    keys: [],
    data: Buffer.from(`apg:wallet-operation:${operationId}`, "utf8"),
  });
}

// ---- signed, stored, sent, resolved -----------------------------------------------------------

export interface SignedTransaction {
  readonly signature: string;
  /** base64 of the wire bytes: re-sending them can land the transaction at most once. */
  readonly wire: string;
  readonly lastValidBlockHeight: number;
}

/** Signs with the authority as fee payer (first signature = the transaction's id). */
export function signTransaction(
  ledger: SettlementLedger,
  transaction: Transaction,
  blockhash: { blockhash: string; lastValidBlockHeight: number },
  cosigners: readonly Keypair[],
): SignedTransaction {
  transaction.feePayer = ledger.authority.publicKey;
  transaction.recentBlockhash = blockhash.blockhash;
  transaction.sign(ledger.authority, ...cosigners);
  const signature = transaction.signature;
  if (signature === null) throw new Error("transaction has no fee-payer signature after signing");
  return {
    signature: bs58.encode(signature),
    // Every signature is required, but not re-verified here: they were made just now from the
    // keypairs, and verifying two ed25519 signatures in JS cost ~7 ms per payment. The RPC node
    // verifies them anyway; a bad one is refused before anything moves (the row is marked failed).
    wire: transaction.serialize({ requireAllSignatures: true, verifySignatures: false }).toString("base64"),
    lastValidBlockHeight: blockhash.lastValidBlockHeight,
  };
}

// ---- a recent blockhash, shared ----------------------------------------------------------------

export interface RecentBlockhash {
  readonly blockhash: string;
  readonly lastValidBlockHeight: number;
}

/** A blockhash younger than this is reused; older ones are refreshed (about 150 blocks are valid). */
const BLOCKHASH_MAX_AGE_MS = 1_000;
/** Past this age a caller still gets the cached one, and a refresh starts in the background. */
const BLOCKHASH_REFRESH_AGE_MS = 500;

interface BlockhashCache {
  value: RecentBlockhash | null;
  fetchedAt: number;
  inflight: Promise<RecentBlockhash> | null;
}

const blockhashCaches = new WeakMap<Connection, BlockhashCache>();

/**
 * A recent blockhash with its last valid block height, at most ~1 s old, shared by every
 * settlement on this connection instead of one RPC read per payment. A transaction signed with it
 * stores that height, so reconciliation decides "can never land" exactly as with a fresh one.
 * `forgetBlockhash` drops it (after the node refused a transaction for its blockhash).
 */
export async function recentBlockhash(ledger: SettlementLedger): Promise<RecentBlockhash> {
  const connection = ledger.connection;
  let cache = blockhashCaches.get(connection);
  if (cache === undefined) {
    cache = { value: null, fetchedAt: 0, inflight: null };
    blockhashCaches.set(connection, cache);
  }
  const age = Date.now() - cache.fetchedAt;
  if (cache.value !== null && age < BLOCKHASH_MAX_AGE_MS) {
    if (age >= BLOCKHASH_REFRESH_AGE_MS) void refreshBlockhash(connection, cache).catch(() => undefined);
    return cache.value;
  }
  return refreshBlockhash(connection, cache);
}

export function forgetBlockhash(ledger: SettlementLedger): void {
  const cache = blockhashCaches.get(ledger.connection);
  if (cache !== undefined) {
    cache.value = null;
    cache.fetchedAt = 0;
  }
}

function refreshBlockhash(connection: Connection, cache: BlockhashCache): Promise<RecentBlockhash> {
  if (cache.inflight !== null) return cache.inflight;
  const requestedAt = Date.now();
  const inflight = connection
    .getLatestBlockhash(COMMITMENT)
    .then(({ blockhash, lastValidBlockHeight }) => {
      // Its age counts from the request, not the answer: never older than it claims.
      const value = { blockhash, lastValidBlockHeight };
      cache.value = value;
      cache.fetchedAt = requestedAt;
      return value;
    })
    .finally(() => {
      cache.inflight = null;
    });
  cache.inflight = inflight;
  return inflight;
}

export type Outcome =
  | { readonly status: "confirmed"; readonly slot: number }
  | { readonly status: "failed"; readonly reason: "included"; readonly slot: number; readonly err: unknown }
  | { readonly status: "failed"; readonly reason: "expired" }
  | { readonly status: "pending" };

/**
 * What the chain says about a signature now. Absent and past its last valid block height at
 * `finalized` means it can never land (the one safe "it did not happen" on Solana); absent
 * before that is still pending.
 */
export async function lookUpOutcomes(
  ledger: SettlementLedger,
  items: readonly { signature: string; lastValidBlockHeight: number }[],
): Promise<Outcome[]> {
  if (items.length === 0) return [];
  const statuses = async (signatures: string[]) =>
    (await ledger.connection.getSignatureStatuses(signatures, { searchTransactionHistory: true })).value;
  const landed = (status: SignatureStatus | null): Outcome | null => {
    if (status === null || (status.confirmationStatus !== "confirmed" && status.confirmationStatus !== "finalized")) return null;
    return status.err === null
      ? { status: "confirmed", slot: status.slot }
      : { status: "failed", reason: "included", slot: status.slot, err: status.err };
  };
  // Landed ones need no height (the common case: one read). For the others, the height is read
  // first and their statuses again after it: a signature absent from a lookup made after the
  // height passed its limit cannot appear later.
  const first = await statuses(items.map((item) => item.signature));
  const outcomes: (Outcome | null)[] = items.map((_, i) => landed(first[i] ?? null));
  const open = items.flatMap((item, i) => (outcomes[i] === null ? [{ item, i }] : []));
  if (open.length > 0) {
    const finalizedHeight = await ledger.connection.getBlockHeight("finalized");
    const again = await statuses(open.map(({ item }) => item.signature));
    for (const [j, { item, i }] of open.entries()) {
      const status = again[j] ?? null;
      outcomes[i] =
        landed(status) ??
        (status === null && finalizedHeight > item.lastValidBlockHeight ? { status: "failed", reason: "expired" } : { status: "pending" });
    }
  }
  return outcomes.map((outcome) => outcome!);
}

const POLL_MS = 150;
const RESEND_EVERY_POLLS = 10;
/** Consecutive failed lookups (RPC down) after which the outcome is left pending. */
const MAX_LOOKUP_FAILURES = 20;

/**
 * Waits until `signed` is confirmed, included with an error, or expired, re-sending the same
 * bytes now and then (a dropped packet must not strand a valid transaction). Bounded by the
 * blockhash's validity; an abort (`signal`) or an RPC that stops answering leaves the outcome
 * `pending`: unknown is never reported as failed.
 */
export async function awaitOutcome(ledger: SettlementLedger, signed: SignedTransaction, signal?: AbortSignal): Promise<Outcome> {
  let lookupFailures = 0;
  for (let poll = 1; ; poll += 1) {
    try {
      const [outcome] = await lookUpOutcomes(ledger, [signed]);
      lookupFailures = 0;
      if (outcome!.status !== "pending") return outcome!;
    } catch {
      lookupFailures += 1;
      if (lookupFailures >= MAX_LOOKUP_FAILURES) return { status: "pending" };
    }
    if (signal?.aborted === true) return { status: "pending" };
    if (poll % RESEND_EVERY_POLLS === 0) {
      await ledger.connection
        .sendRawTransaction(Buffer.from(signed.wire, "base64"), { skipPreflight: true, maxRetries: 0 })
        .catch(() => undefined);
    }
    await delay(POLL_MS);
  }
}

export type SubmitResult =
  | Outcome
  /** The RPC node refused it before forwarding (preflight simulation, bad blockhash): nothing was sent. */
  | { readonly status: "rejected"; readonly error: unknown };

/**
 * Sends `signed` (with preflight) and waits for its outcome. An RPC answer refusing it means it
 * was never forwarded; any other failure to send (timeout, connection reset) is an unknown
 * outcome, so the signature is watched (and re-sent) like a sent one.
 */
export async function submit(ledger: SettlementLedger, signed: SignedTransaction, signal?: AbortSignal): Promise<SubmitResult> {
  try {
    await ledger.connection.sendRawTransaction(Buffer.from(signed.wire, "base64"), {
      preflightCommitment: COMMITMENT,
      maxRetries: 0,
    });
  } catch (error) {
    const refused = error instanceof SendTransactionError && !/already\s*(been\s*)?processed/i.test(error.message);
    if (refused) {
      // A cached blockhash the node no longer knows: the next transaction gets a fresh one.
      if (/blockhash\s*not\s*found/i.test(error.message)) forgetBlockhash(ledger);
      return { status: "rejected", error };
    }
  }
  return awaitOutcome(ledger, signed, signal);
}
