/**
 * The payee's voucher journal: a voucher it accepted is durable BEFORE the paid handler runs, so a
 * crash after serving never loses the money (the restarted payee replays the journal and presents
 * what it had not yet settled). One record per event, append-only:
 *
 * - `open`: what the payee read of the channel account (payer, deposit, expiry, settled state);
 * - `voucher`: one accepted voucher and the charge it adds (enough to settle it);
 * - `settled`: the gateway confirmed every charge up to `sequence` (never presented again).
 *
 * `FileVoucherJournal` writes `crc32 json\n` lines and makes each append durable with fdatasync,
 * one sync for all the appends that arrived while the previous one ran (group commit). A torn or
 * corrupt tail (a crash mid-write) is cut at the last whole record on open. `MemoryVoucherJournal`
 * keeps records in memory, for tests and payees that accept losing unsettled vouchers in a crash.
 */
import { type FileHandle, open } from "node:fs/promises";

export type JournalRecord =
  | {
      readonly kind: "open";
      readonly channel: string;
      readonly payer: string;
      readonly payee: string;
      readonly mint: string;
      readonly depositUnits: string;
      readonly openedSlot: string;
      readonly expiresAtSeconds: number;
      readonly settledCumulativeUnits: string;
      readonly settledSequence: string;
      /** Hex. */
      readonly settledDigest: string;
      readonly lastPaymentId: string;
    }
  | {
      readonly kind: "voucher";
      readonly channel: string;
      readonly sequence: string;
      readonly paymentId: string;
      readonly amountUnits: string;
      readonly cumulativeUnits: string;
      /** The endpoint as the payer signed it (its hash is in the digest). */
      readonly endpoint: string;
      /** Hex. */
      readonly digest: string;
      /** Base58, the payer's. */
      readonly signature: string;
    }
  | {
      readonly kind: "settled";
      readonly channel: string;
      readonly sequence: string;
      readonly cumulativeUnits: string;
      readonly transactions: readonly string[];
    };

export interface VoucherJournal {
  /** Resolves once the record is durable (as durable as the implementation promises). */
  append(record: JournalRecord): Promise<void>;
  /** Every whole record, oldest first; called once, before the first append. */
  replay(): Promise<JournalRecord[]>;
  close(): Promise<void>;
}

export class MemoryVoucherJournal implements VoucherJournal {
  readonly records: JournalRecord[] = [];

  async append(record: JournalRecord): Promise<void> {
    this.records.push(record);
  }

  async replay(): Promise<JournalRecord[]> {
    return [...this.records];
  }

  async close(): Promise<void> {}
}

/** One record is a line; a longer one is refused (a voucher record is well under 1 KiB). */
const MAX_RECORD_BYTES = 4_096;

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32 (IEEE), as zlib computes it. */
export function crc32(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function encode(record: JournalRecord): Buffer {
  const json = Buffer.from(JSON.stringify(record), "utf8");
  if (json.length > MAX_RECORD_BYTES) throw new RangeError("journal record too large");
  return Buffer.concat([Buffer.from(`${crc32(json).toString(16).padStart(8, "0")} `, "ascii"), json, Buffer.from("\n")]);
}

/** The whole records of a journal file and the byte length they span (the rest is a torn tail). */
export function decodeJournal(bytes: Buffer): { records: JournalRecord[]; validBytes: number } {
  const records: JournalRecord[] = [];
  let at = 0;
  while (at < bytes.length) {
    const end = bytes.indexOf(0x0a, at);
    if (end === -1 || end - at < 10 || bytes[at + 8] !== 0x20) break;
    const json = bytes.subarray(at + 9, end);
    if (Number.parseInt(bytes.subarray(at, at + 8).toString("ascii"), 16) !== crc32(json)) break;
    try {
      records.push(JSON.parse(json.toString("utf8")) as JournalRecord);
    } catch {
      break;
    }
    at = end + 1;
  }
  return { records, validBytes: at };
}

interface Waiter {
  readonly bytes: Buffer;
  resolve(): void;
  reject(error: unknown): void;
}

export class FileVoucherJournal implements VoucherJournal {
  #file: FileHandle | null = null;
  #queue: Waiter[] = [];
  #flushing = false;
  /** fdatasync calls made (each covering every append queued meanwhile): group commit, observable. */
  syncs = 0;

  constructor(readonly path: string) {}

  async replay(): Promise<JournalRecord[]> {
    const file = await open(this.path, "a+");
    const { records, validBytes } = decodeJournal(await file.readFile());
    const size = (await file.stat()).size;
    if (validBytes < size) {
      // A crash tore the last write: the record was never acknowledged, so it was never served on.
      await file.truncate(validBytes);
      await file.datasync();
    }
    this.#file = file;
    return records;
  }

  append(record: JournalRecord): Promise<void> {
    if (this.#file === null) return Promise.reject(new Error("FileVoucherJournal: replay() before append()"));
    const bytes = encode(record);
    return new Promise((resolve, reject) => {
      this.#queue.push({ bytes, resolve, reject });
      if (!this.#flushing) void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    while (this.#queue.length > 0) {
      const batch = this.#queue;
      this.#queue = [];
      try {
        // Opened for append: every write lands at the end, whatever the position.
        await this.#file!.write(Buffer.concat(batch.map((w) => w.bytes)));
        await this.#file!.datasync();
        this.syncs++;
        for (const waiter of batch) waiter.resolve();
      } catch (error) {
        for (const waiter of batch) waiter.reject(error);
      }
    }
    this.#flushing = false;
  }

  async close(): Promise<void> {
    while (this.#flushing) await new Promise((resolve) => setImmediate(resolve));
    await this.#file?.close();
    this.#file = null;
  }
}
