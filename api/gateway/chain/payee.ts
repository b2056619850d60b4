/**
 * Which payees the ledger can credit safely (docs/protocols.md "Payees"): tokens sent to an owner
 * nobody can sign for are gone for good, and a token account the service creates costs it rent.
 * So, before anything is signed:
 *
 * 1. Everywhere a payee enters, no chain read: `payTo` is a canonical base58 address on the
 *    ed25519 curve (a wallet key someone holds, not a PDA only its program could move from), and
 *    not the settlement mint, the requirement's token, nor a program or sysvar the ledger runs.
 * 2. At settlement, when tokens move: the account at `payTo`, if any, is a plain wallet (System
 *    owned, not executable), and its associated token account, if any, is the Token program's.
 * 3. A missing associated token account is created by the service, which pays its rent, at most
 *    `DEFAULT_PAYEE_ACCOUNT_QUOTA` per paying account in any 24 hours (`payee_account_quota`).
 */
import { ASSOCIATED_TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from "@solana/spl-token";
import {
  AddressLookupTableProgram,
  BPF_LOADER_DEPRECATED_PROGRAM_ID,
  BPF_LOADER_PROGRAM_ID,
  ComputeBudgetProgram,
  Ed25519Program,
  PublicKey,
  Secp256k1Program,
  StakeProgram,
  SystemProgram,
  VOTE_PROGRAM_ID,
} from "@solana/web3.js";
import bs58 from "bs58";
import { ServiceError } from "../../shared/errors.js";

/** New payee token accounts the service pays rent for, per paying account, in any 24 hours. */
export const DEFAULT_PAYEE_ACCOUNT_QUOTA = 100;

/** Why a payee is refused. Codes are stable; never reuse one for another meaning. */
export type PayeeRefusalReason =
  | "payee_invalid_address"
  | "payee_is_mint"
  | "payee_is_program"
  | "payee_off_curve"
  | "payee_not_wallet"
  | "payee_token_account_invalid"
  | "payee_account_quota";

/** A payee the ledger cannot credit safely (PAYEE_REFUSED); nothing was signed or moved when it is thrown. */
export class PayeeRefusedError extends ServiceError {
  declare readonly reason: PayeeRefusalReason;
  /** The request field that named the payee (`payTo`, `x402.payTo`). */
  declare readonly field: string;

  constructor(
    reason: PayeeRefusalReason,
    readonly payee: string,
    detail: string,
    field = "payTo",
  ) {
    super("PAYEE_REFUSED", `${reason}: ${detail}`, { reason, field, extra: { payee } });
    this.name = "PayeeRefusedError";
  }
}

/**
 * Programs every cluster holds at fixed addresses. payment_ledger, deployed wherever PROGRAM_ID
 * says, is refused by rule 2 like any other executable account.
 */
const PROGRAMS_AND_SYSVARS = new Set<string>(
  [
    SystemProgram.programId,
    TOKEN_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    ASSOCIATED_TOKEN_PROGRAM_ID,
    BPF_LOADER_PROGRAM_ID,
    BPF_LOADER_DEPRECATED_PROGRAM_ID,
    new PublicKey("BPFLoaderUpgradeab1e11111111111111111111111"),
    new PublicKey("LoaderV411111111111111111111111111111111111"),
    new PublicKey("NativeLoader1111111111111111111111111111111"),
    new PublicKey("Config1111111111111111111111111111111111111"),
    new PublicKey("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr"),
    new PublicKey("Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo"),
    ComputeBudgetProgram.programId,
    Ed25519Program.programId,
    Secp256k1Program.programId,
    StakeProgram.programId,
    VOTE_PROGRAM_ID,
    AddressLookupTableProgram.programId,
  ].map((key) => key.toBase58()),
);

/**
 * Rule 1 (static): refuses `payTo` unless it is a wallet key the ledger can credit. `mints` are
 * the settlement mint and any token the payment names (undefined entries are skipped).
 */
export function checkPayee(payTo: string, mints: ReadonlyArray<string | PublicKey | undefined>, field = "payTo"): PublicKey {
  let bytes: Uint8Array;
  try {
    bytes = bs58.decode(payTo);
  } catch {
    throw new PayeeRefusedError("payee_invalid_address", payTo, "not a base58 address", field);
  }
  if (bytes.length !== 32) throw new PayeeRefusedError("payee_invalid_address", payTo, "not a 32-byte address", field);
  const key = new PublicKey(bytes);
  const text = key.toBase58();
  for (const mint of mints) {
    if (mint !== undefined && (typeof mint === "string" ? mint : mint.toBase58()) === text) {
      throw new PayeeRefusedError("payee_is_mint", text, "the payee is the token's mint: tokens sent to it are lost", field);
    }
  }
  if (PROGRAMS_AND_SYSVARS.has(text) || text.startsWith("Sysvar")) {
    throw new PayeeRefusedError("payee_is_program", text, "the payee is a program or sysvar address, not a wallet", field);
  }
  if (!onCurve(text, bytes)) {
    throw new PayeeRefusedError(
      "payee_off_curve",
      text,
      "the payee is off the ed25519 curve (a program-derived address): no key can move what it receives",
      field,
    );
  }
  return key;
}

/**
 * Whether the address is on the ed25519 curve, remembered per address: deciding it decompresses
 * the point (a field exponentiation in JavaScript, ~4 % of an authorization's CPU), and the same
 * few payees come back on every payment. A pure function of the bytes, so a remembered answer is
 * the answer; the memo is emptied when full.
 */
const onCurveMemo = new Map<string, boolean>();
const ON_CURVE_MEMO_ENTRIES = 10_000;

function onCurve(text: string, bytes: Uint8Array): boolean {
  let answer = onCurveMemo.get(text);
  if (answer === undefined) {
    answer = PublicKey.isOnCurve(bytes);
    if (onCurveMemo.size >= ON_CURVE_MEMO_ENTRIES) onCurveMemo.clear();
    onCurveMemo.set(text, answer);
  }
  return answer;
}

/** `checkPayee` as a value: the refusal, or null for a creditable payee. */
export function payeeRefusal(
  payTo: string,
  mints: ReadonlyArray<string | PublicKey | undefined>,
  field = "payTo",
): PayeeRefusedError | null {
  try {
    checkPayee(payTo, mints, field);
    return null;
  } catch (error) {
    if (error instanceof PayeeRefusedError) return error;
    throw error;
  }
}

/** What the chain holds for a payee (rule 2), read by the settlement before signing. */
export interface PayeeAccounts {
  /** The account at `payTo`: null when it does not exist (a wallet that never held SOL). */
  readonly payee: { readonly owner: PublicKey; readonly executable: boolean } | null;
  /** Its associated token account of the settlement mint: null when missing. */
  readonly tokenAccount: { readonly owner: PublicKey } | null;
}

/**
 * Rule 2: refuses a payee whose account is not a plain wallet, or whose associated token account
 * is not a Token program account. Answers whether the token account must be created.
 */
export function checkPayeeAccounts(payee: string, accounts: PayeeAccounts): { readonly createTokenAccount: boolean } {
  if (accounts.payee !== null && (accounts.payee.executable || !accounts.payee.owner.equals(SystemProgram.programId))) {
    throw new PayeeRefusedError(
      "payee_not_wallet",
      payee,
      `the payee is ${accounts.payee.executable ? "a program" : `an account of program ${accounts.payee.owner.toBase58()}`} (a mint, token account or program data), not a wallet`,
    );
  }
  if (accounts.tokenAccount !== null && !accounts.tokenAccount.owner.equals(TOKEN_PROGRAM_ID)) {
    throw new PayeeRefusedError("payee_token_account_invalid", payee, "the payee's associated token address is not a token account");
  }
  return { createTokenAccount: accounts.tokenAccount === null };
}
