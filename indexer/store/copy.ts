/**
 * Rows into PostgreSQL through `COPY ... FROM STDIN` (pg-copy-streams), in COPY's text format:
 * the cheapest way in for many rows (no statement per row, no parameter parsing). Values are
 * written by the callers with these encoders, one line per row, columns separated by tabs.
 */
import { pipeline } from "node:stream/promises";
import { Readable } from "node:stream";
import type pg from "pg";
import { from as copyFrom } from "pg-copy-streams";

/** COPY's NULL. */
export const NULL = "\\N";

const SPECIAL = /[\\\t\n\r]/;
const SPECIALS = /[\\\t\n\r]/g;
const ESCAPES: Readonly<Record<string, string>> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" };

/** A text value (null as NULL), with COPY's escapes where needed. */
export function text(value: string | null | undefined): string {
  if (value === null || value === undefined) return NULL;
  return SPECIAL.test(value) ? value.replace(SPECIALS, (c) => ESCAPES[c]!) : value;
}

/** A bytea value in hex form (`\x…`, its backslash escaped for COPY). */
export function bytea(value: Uint8Array): string {
  return `\\\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex")}`;
}

/** Streams `lines` (each ending in a newline) into `COPY <target> FROM STDIN`. */
export async function copyIn(client: pg.ClientBase, target: string, lines: readonly string[]): Promise<void> {
  if (lines.length === 0) return;
  const stream = client.query(copyFrom(`COPY ${target} FROM STDIN`));
  await pipeline(Readable.from([lines.join("")]), stream);
}
