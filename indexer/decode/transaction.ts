/**
 * A normalized transaction -> the program's events, or the reason it yields none. Never throws:
 * whatever a source hands over, the ingest loop gets a value it can store and count.
 *
 * Events are read from `emit_cpi!` inner instructions (instructions to the program whose first
 * account is the event-authority PDA: only the program can sign for it, and log truncation
 * cannot lose them). `Program data:` logs are the fallback when a source reports no inner
 * instructions; truncated logs are flagged, since events may then be missing. Keys are the
 * static ones followed by those loaded from lookup tables; a transaction whose loaded keys the
 * source did not report is `unresolved`, never `no_events`.
 */
import type { PublicKey } from "@solana/web3.js";
import {
  EVENT_IX_TAG,
  eventAuthorityPda,
  LOG_TRUNCATED,
  type LedgerEventName,
  programDataLines,
} from "../../programs/payment_ledger/ts/index.js";
import type { RawTransaction } from "../sources/source.js";
import { type ReadEvent, readEvent } from "./event-reader.js";
import type { EventPayload } from "./payload.js";

export type TransactionOutcome =
  | "indexed"
  | "no_events"
  | "failed"
  | "foreign"
  | "malformed"
  | "unknown_event"
  | "truncated"
  | "unresolved";

export interface DecodedEvent {
  readonly signature: string;
  readonly instructionIndex: number;
  /** -1 when read from logs. */
  readonly innerIndex: number;
  readonly ordinal: number;
  readonly slot: bigint;
  readonly blockTime: number | null;
  readonly commitment: RawTransaction["commitment"];
  readonly name: LedgerEventName;
  readonly payload: EventPayload;
  /** Discriminator + borsh body. */
  readonly raw: Uint8Array;
  readonly source: "inner-instructions" | "logs";
}

export interface DecodedTransaction {
  readonly signature: string;
  readonly slot: bigint;
  readonly outcome: TransactionOutcome;
  readonly detail: string | null;
  /** Events that decoded; kept even when another event of the same transaction did not. */
  readonly events: readonly DecodedEvent[];
}

/** The largest number of events we accept from one transaction (a limit on every loop). */
export const MAX_EVENTS_PER_TRANSACTION = 256;

function startsWith(data: Uint8Array, prefix: Uint8Array): boolean {
  if (data.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i += 1) if (data[i] !== prefix[i]) return false;
  return true;
}

interface Candidate {
  readonly instructionIndex: number;
  readonly innerIndex: number;
  /** Discriminator + body. */
  readonly raw: Uint8Array;
  readonly source: "inner-instructions" | "logs";
}

function innerCandidates(tx: RawTransaction, programIndex: number, authority: string): Candidate[] {
  const candidates: Candidate[] = [];
  for (const group of tx.innerInstructions) {
    for (let innerIndex = 0; innerIndex < group.instructions.length; innerIndex += 1) {
      const instruction = group.instructions[innerIndex]!;
      if (instruction.programIdIndex !== programIndex) continue;
      const first = instruction.accounts[0];
      if (first === undefined || tx.accountKeys[first] !== authority) continue;
      if (!startsWith(instruction.data, EVENT_IX_TAG)) continue;
      candidates.push({
        instructionIndex: group.index,
        innerIndex,
        raw: instruction.data.subarray(EVENT_IX_TAG.length),
        source: "inner-instructions",
      });
    }
  }
  return candidates;
}

/** `Program data:` lines printed while the program itself is executing. */
function logCandidates(logs: readonly string[], programId: string): Candidate[] {
  return programDataLines(logs, programId).map(({ instructionIndex, base64 }) => ({
    instructionIndex,
    innerIndex: -1,
    raw: new Uint8Array(Buffer.from(base64, "base64")),
    source: "logs",
  }));
}

/** The hand-written reader (event-reader.ts), checked against the IDL coder by its tests. */
function decodeCandidate(candidate: Candidate): ReadEvent | null | "malformed" {
  try {
    return readEvent(candidate.raw);
  } catch {
    return "malformed";
  }
}

// Deriving a PDA costs a curve check per bump tried, and base58 of a key costs more than reading
// an event: both once per program object, not per transaction.
interface ProgramKeys {
  readonly id: string;
  readonly authority: string;
}
const programKeys = new WeakMap<PublicKey, ProgramKeys>();
function keysOf(programId: PublicKey): ProgramKeys {
  let keys = programKeys.get(programId);
  if (keys === undefined) {
    keys = { id: programId.toBase58(), authority: eventAuthorityPda(programId).address.toBase58() };
    programKeys.set(programId, keys);
  }
  return keys;
}

/** Built field by field: an object spread here cost more than reading the event (measured). */
function outcome(
  tx: RawTransaction,
  result: TransactionOutcome,
  detail: string | null,
  events: readonly DecodedEvent[],
): DecodedTransaction {
  return { signature: tx.signature, slot: tx.slot, outcome: result, detail, events };
}

export function decodeRawTransaction(tx: RawTransaction, programId: PublicKey): DecodedTransaction {
  try {
    if (tx.err !== null && tx.err !== undefined) {
      return outcome(tx, "failed", JSON.stringify(tx.err), []);
    }
    // Without every looked-up key, an index may point past (or at the wrong) key: neither the
    // program nor its event authority can be told apart, so "no events" would be a guess.
    const unresolved = tx.unresolvedKeys ?? 0;
    if (unresolved > 0) return outcome(tx, "unresolved", `${unresolved} account key(s) from address lookup tables not reported`, []);
    const { id, authority } = keysOf(programId);
    const programIndex = tx.accountKeys.indexOf(id);
    if (programIndex < 0) return outcome(tx, "foreign", null, []);

    const logs = tx.logs ?? [];
    const truncated = logs.some((line) => line.includes(LOG_TRUNCATED));
    let candidates = innerCandidates(tx, programIndex, authority);
    const noInnerReported = tx.innerInstructions.length === 0;
    if (candidates.length === 0 && noInnerReported) candidates = logCandidates(logs, id);
    if (candidates.length > MAX_EVENTS_PER_TRANSACTION) {
      return outcome(tx, "malformed", `${candidates.length} events`, []);
    }

    const events: DecodedEvent[] = [];
    let unknown = 0;
    let malformed = 0;
    for (const candidate of candidates) {
      const event = decodeCandidate(candidate);
      if (event === "malformed") {
        malformed += 1;
        continue;
      }
      if (event === null) {
        unknown += 1;
        continue;
      }
      events.push({
        signature: tx.signature,
        slot: tx.slot,
        instructionIndex: candidate.instructionIndex,
        innerIndex: candidate.innerIndex,
        ordinal: events.length,
        blockTime: tx.blockTime,
        commitment: tx.commitment,
        name: event.name,
        payload: event.payload,
        raw: candidate.raw,
        source: candidate.source,
      });
    }
    const usedLogs = candidates.some((c) => c.source === "logs") || (candidates.length === 0 && noInnerReported);
    if (malformed > 0) return outcome(tx, "malformed", `${malformed} undecodable event(s)`, events);
    if (unknown > 0) return outcome(tx, "unknown_event", `${unknown} unknown discriminator(s)`, events);
    if (truncated && usedLogs) return outcome(tx, "truncated", "logs truncated; events may be missing", events);
    if (events.length === 0) return outcome(tx, "no_events", null, events);
    return outcome(tx, "indexed", null, events);
  } catch (error) {
    return outcome(tx, "malformed", (error as Error).message, []);
  }
}
