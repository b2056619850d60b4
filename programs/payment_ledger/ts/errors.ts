/**
 * The program's error codes, named from the IDL. Codes are stable (errors.rs appends, never
 * renumbers), so a code seen on-chain always maps to the same name.
 */
import type { PublicKey } from "@solana/web3.js";
import { PAYMENT_LEDGER_IDL } from "./idl.js";

export interface LedgerErrorInfo {
  readonly code: number;
  /** As declared in `LedgerError` (errors.rs), e.g. `InvocationBudgetExceeded`. */
  readonly name: string;
  readonly message: string;
}

export const LEDGER_ERRORS: ReadonlyMap<number, LedgerErrorInfo> = new Map(
  (PAYMENT_LEDGER_IDL.errors ?? []).map((error) => [error.code, { code: error.code, name: error.name, message: error.msg ?? error.name }]),
);

const BY_NAME: ReadonlyMap<string, LedgerErrorInfo> = new Map([...LEDGER_ERRORS.values()].map((info) => [info.name, info]));

export function ledgerErrorByCode(code: number): LedgerErrorInfo | undefined {
  return LEDGER_ERRORS.get(code);
}

/** The code of a named error; throws for a name the IDL does not declare (a typo, not a miss). */
export function ledgerErrorCode(name: string): number {
  const info = BY_NAME.get(name);
  if (info === undefined) throw new RangeError(`payment_ledger declares no error named ${name}`);
  return info.code;
}

/** A transaction the program refused, with the program's own error name. */
export class LedgerProgramError extends Error {
  override readonly name = "LedgerProgramError";
  readonly code: number;
  readonly errorName: string;
  readonly logs: readonly string[];

  constructor(info: LedgerErrorInfo, logs: readonly string[], options?: { cause?: unknown }) {
    super(`payment_ledger ${info.name} (${info.code}): ${info.message}`, options);
    this.code = info.code;
    this.errorName = info.name;
    this.logs = logs;
  }
}

function logsOf(error: unknown): readonly string[] {
  if (error === null || typeof error !== "object") return [];
  // web3.js SendTransactionError and Anchor errors both expose `logs`; the RPC error data may too.
  for (const candidate of [(error as { logs?: unknown }).logs, (error as { data?: { logs?: unknown } }).data?.logs]) {
    if (Array.isArray(candidate) && candidate.every((line) => typeof line === "string")) return candidate;
  }
  return [];
}

/**
 * The error code the program itself reported, read from the runtime's log lines. Anchor logs
 * `Error Number: N` and the runtime `Program <id> failed: custom program error: 0xN`; only a
 * failure line that names this program counts, so an error of a program it called is not
 * mistaken for one of its own.
 */
export function ledgerErrorCodeFromLogs(logs: readonly string[], programId: PublicKey): number | undefined {
  const failed = new RegExp(`^Program ${programId.toBase58()} failed: custom program error: 0x([0-9a-fA-F]+)$`);
  for (const line of logs) {
    const match = failed.exec(line);
    if (match !== null) return Number.parseInt(match[1]!, 16);
  }
  return undefined;
}

/**
 * The transaction error `{ InstructionError: [index, { Custom: code }] }` of a failed transaction,
 * when the instruction at `index` is one of the program's (`programIds` lists each top-level
 * instruction's program).
 */
export function ledgerErrorCodeFromTransactionError(
  transactionError: unknown,
  programIds: readonly PublicKey[],
  programId: PublicKey,
): number | undefined {
  if (transactionError === null || typeof transactionError !== "object") return undefined;
  const detail = (transactionError as { InstructionError?: unknown }).InstructionError;
  if (!Array.isArray(detail) || detail.length !== 2) return undefined;
  const [index, cause] = detail as [unknown, unknown];
  if (typeof index !== "number" || !programIds[index]?.equals(programId)) return undefined;
  const custom = cause !== null && typeof cause === "object" ? (cause as { Custom?: unknown }).Custom : undefined;
  return typeof custom === "number" ? custom : undefined;
}

/** The program error behind a failed send/simulate/confirm, or null if it is not the program's. */
export function findLedgerError(error: unknown, programId: PublicKey): LedgerProgramError | null {
  if (error instanceof LedgerProgramError) return error;
  const logs = logsOf(error);
  const code = ledgerErrorCodeFromLogs(logs, programId);
  const info = code === undefined ? undefined : ledgerErrorByCode(code);
  return info === undefined ? null : new LedgerProgramError(info, logs, { cause: error });
}

export function isLedgerError(error: unknown, name: string, programId: PublicKey): boolean {
  ledgerErrorCode(name);
  return findLedgerError(error, programId)?.errorName === name;
}
