/**
 * A normalized transaction -> the program's events, or the reason it yields none. Never throws:
 * whatever a source hands over, the ingest loop gets a value it can store and count.
 *
 * Events are read from `emit_cpi!` inner instructions (instructions to the program whose first
 * account is the event-authority PDA: only the program can sign for it, and log truncation
 * cannot lose them). `Program data:` logs are the fallback when a source reports no inner
 * instructions; truncated logs are flagged, since events may then be missing.
 */
import type { PublicKey } from "@solana/web3.js";
import {
  decodeEventBase64,
  decodeEventInstructionData,
  EVENT_IX_TAG,
  eventAuthorityPda,
  LOG_TRUNCATED,
  type LedgerEvent,
  PAYMENT_LEDGER_PROGRAM_ID,
  programDataLines,
} from "../../programs/payment_ledger/ts/index.js";
import type { RawTransaction } from "../sources/source.js";
import { type EventPayload, eventPayload } from "./payload.js";

export type TransactionOutcome = "indexed" | "no_events" | "failed" | "foreign" | "malformed" | "unknown_event" | "truncated";

export interface DecodedEvent {
  readonly signature: string;
  readonly instructionIndex: number;
  /** -1 when read from logs. */
  readonly innerIndex: number;
  readonly ordinal: number;
  readonly slot: bigint;
  readonly blockTime: number | null;
  readonly commitment: RawTransaction["commitment"];
  readonly name: LedgerEvent["name"];
  readonly event: LedgerEvent;
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
  return data.length >= prefix.length && prefix.every((byte, i) => data[i] === byte);
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
    group.instructions.forEach((instruction, innerIndex) => {
      if (instruction.programIdIndex !== programIndex) return;
      const first = instruction.accounts[0];
      if (first === undefined || tx.accountKeys[first] !== authority) return;
      if (!startsWith(instruction.data, EVENT_IX_TAG)) return;
      candidates.push({
        instructionIndex: group.index,
        innerIndex,
        raw: instruction.data.subarray(EVENT_IX_TAG.length),
        source: "inner-instructions",
      });
    });
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

function decodeCandidate(candidate: Candidate): LedgerEvent | null | "malformed" {
  try {
    const event =
      candidate.source === "logs"
        ? decodeEventBase64(Buffer.from(candidate.raw).toString("base64"))
        : decodeEventInstructionData(Uint8Array.from([...EVENT_IX_TAG, ...candidate.raw]));
    return event;
  } catch {
    return "malformed";
  }
}

// Deriving a PDA costs a curve check per bump tried: once per program, not per transaction.
const eventAuthorities = new Map<string, string>();
function eventAuthorityOf(programId: PublicKey): string {
  const id = programId.toBase58();
  let authority = eventAuthorities.get(id);
  if (authority === undefined) {
    authority = eventAuthorityPda(programId).address.toBase58();
    eventAuthorities.set(id, authority);
  }
  return authority;
}

export function decodeRawTransaction(tx: RawTransaction, programId: PublicKey = PAYMENT_LEDGER_PROGRAM_ID): DecodedTransaction {
  const base = { signature: tx.signature, slot: tx.slot };
  try {
    if (tx.err !== null && tx.err !== undefined) {
      return { ...base, outcome: "failed", detail: JSON.stringify(tx.err), events: [] };
    }
    const id = programId.toBase58();
    const programIndex = tx.accountKeys.indexOf(id);
    if (programIndex < 0) return { ...base, outcome: "foreign", detail: null, events: [] };

    const authority = eventAuthorityOf(programId);
    const logs = tx.logs ?? [];
    const truncated = logs.some((line) => line.includes(LOG_TRUNCATED));
    let candidates = innerCandidates(tx, programIndex, authority);
    const noInnerReported = tx.innerInstructions.length === 0;
    if (candidates.length === 0 && noInnerReported) candidates = logCandidates(logs, id);
    if (candidates.length > MAX_EVENTS_PER_TRANSACTION) {
      return { ...base, outcome: "malformed", detail: `${candidates.length} events`, events: [] };
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
        ...base,
        instructionIndex: candidate.instructionIndex,
        innerIndex: candidate.innerIndex,
        ordinal: events.length,
        blockTime: tx.blockTime,
        commitment: tx.commitment,
        name: event.name,
        event,
        payload: eventPayload(event),
        raw: candidate.raw,
        source: candidate.source,
      });
    }
    const usedLogs = candidates.some((c) => c.source === "logs") || (candidates.length === 0 && noInnerReported);
    if (malformed > 0) return { ...base, outcome: "malformed", detail: `${malformed} undecodable event(s)`, events };
    if (unknown > 0) return { ...base, outcome: "unknown_event", detail: `${unknown} unknown discriminator(s)`, events };
    if (truncated && usedLogs) return { ...base, outcome: "truncated", detail: "logs truncated; events may be missing", events };
    if (events.length === 0) return { ...base, outcome: "no_events", detail: null, events };
    return { ...base, outcome: "indexed", detail: null, events };
  } catch (error) {
    return { ...base, outcome: "malformed", detail: (error as Error).message, events: [] };
  }
}
