/**
 * What a command runs with: the gateway connection, the parsed options, and the output streams.
 * Everything written goes through `out`/`err`, which blank out the API key should any text
 * (an echoed URL, an error detail) ever contain it.
 */
import type { Transport } from "../transport.js";
import type { Options } from "./args.js";

export interface Writer {
  write(chunk: string): unknown;
}

export interface CliIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdout: Writer;
  readonly stderr: Writer;
}

export interface CommandContext {
  readonly transport: Transport;
  readonly args: Readonly<Record<string, string>>;
  readonly options: Options;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Writes a line (or lines) to stdout. */
  out(text: string): void;
  /** Writes a line to stderr. */
  err(text: string): void;
  /** `--json`: writes the value as indented JSON. */
  json(value: unknown): void;
}

export type Command = (context: CommandContext) => Promise<void>;

/** Shorter "keys" are not real keys; blanking them would garble ordinary output. */
const REDACT_MIN_LENGTH = 8;

/** A writer that never lets `secret` through. */
export function redactingWriter(target: Writer, secret: string | undefined): (text: string) => void {
  return (text) => {
    const safe = secret === undefined || secret.length < REDACT_MIN_LENGTH ? text : text.split(secret).join("[redacted]");
    target.write(safe.endsWith("\n") ? safe : `${safe}\n`);
  };
}
