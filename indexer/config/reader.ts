/**
 * Reads variables from one environment and collects every problem instead of stopping at the
 * first: an operator fixes a configuration in one round, not one variable per restart. Each
 * problem is one line, `NAME: what is wrong; expected what`. Secret values are never echoed.
 */
import { readFileSync } from "node:fs";
import { Keypair, PublicKey } from "@solana/web3.js";
import { type Service, variable } from "./variables.js";

export type Env = Readonly<Record<string, string | undefined>>;

/** A value parsed from text, or why it is not one (the part after `NAME: `, without "expected"). */
export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly issue: string };

export interface Parser<T> {
  /** What a valid value looks like, after "expected". */
  readonly expected: string;
  /** Whether the value is a secret (never quoted back in a problem line). */
  readonly secret?: boolean;
  parse(text: string): Parsed<T>;
}

export class ConfigReader {
  readonly #env: Env;
  readonly #service: Service;
  readonly problems: string[] = [];

  constructor(env: Env, service: Service) {
    this.#env = env;
    this.#service = service;
  }

  /** The raw text, or undefined when unset or empty; the name must be in the table for this service. */
  raw(name: string): string | undefined {
    if (variable(name).readBy[this.#service] === undefined) {
      throw new Error(`${this.#service} reads ${name}, which indexer/config/variables.ts does not list for it`);
    }
    const text = this.#env[name];
    return text === undefined || text.trim() === "" ? undefined : text.trim();
  }

  required<T>(name: string, parser: Parser<T>): T | undefined {
    const text = this.raw(name);
    if (text === undefined) {
      this.problem(name, "not set", parser.expected);
      return undefined;
    }
    return this.#parse(name, text, parser);
  }

  optional<T>(name: string, parser: Parser<T>): T | undefined {
    const text = this.raw(name);
    return text === undefined ? undefined : this.#parse(name, text, parser);
  }

  withDefault<T>(name: string, parser: Parser<T>, fallback: T): T {
    return this.optional(name, parser) ?? fallback;
  }

  problem(name: string, issue: string, expected: string): void {
    this.problems.push(`${name}: ${issue}; expected ${expected}`);
  }

  #parse<T>(name: string, text: string, parser: Parser<T>): T | undefined {
    const parsed = parser.parse(text);
    if (parsed.ok) return parsed.value;
    const shown = parser.secret === true ? "the value" : JSON.stringify(text.length > 80 ? `${text.slice(0, 77)}...` : text);
    this.problem(name, `${shown} ${parsed.issue}`, parser.expected);
    return undefined;
  }
}

const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const bad = (issue: string): Parsed<never> => ({ ok: false, issue });

function url(protocols: readonly string[], expected: string): Parser<string> {
  return {
    expected,
    parse(text) {
      let parsed: URL;
      try {
        parsed = new URL(text);
      } catch {
        return bad("is not a URL");
      }
      if (!protocols.includes(parsed.protocol)) return bad(`has scheme ${parsed.protocol.replace(/:$/, "")}`);
      if (parsed.hostname === "") return bad("has no host");
      return ok(text);
    },
  };
}

export const postgresUrl = url(["postgres:", "postgresql:"], "a postgres:// URL of the database");
export const httpUrl = url(["http:", "https:"], "an http(s):// URL of the cluster's JSON-RPC endpoint");
export const smtpUrl = url(["smtp:", "smtps:"], "an smtp:// or smtps:// URL");
export const publicUrl = url(["http:", "https:"], "an http(s):// URL the gateway is reached at from outside");
export const grpcUrl = url(["http:", "https:"], "an http(s):// URL of the Yellowstone gRPC endpoint");

export const base58Address: Parser<PublicKey> = {
  expected: "a base58 address (32 bytes)",
  parse(text) {
    if (!/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(text)) return bad("is not base58");
    try {
      const key = new PublicKey(text);
      return key.equals(PublicKey.default) ? bad("is the all-zero address") : ok(key);
    } catch {
      return bad("is not a 32-byte address");
    }
  },
};

export const genesisHash: Parser<string> = {
  expected: "the cluster's genesis hash (base58, from `solana genesis-hash`)",
  parse(text) {
    if (!/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(text)) return bad("is not base58");
    return ok(text);
  },
};

/** A Solana CLI keypair file: a JSON array of the 64 secret-key bytes, readable by this process. */
export const keypairFile: Parser<{ readonly path: string; readonly keypair: Keypair }> = {
  expected: "the path of a Solana CLI keypair file (a JSON array of 64 bytes)",
  parse(path) {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return bad("does not exist");
      if (code === "EACCES") return bad("is not readable by this process");
      if (code === "EISDIR") return bad("is a directory");
      return bad(`cannot be read (${code ?? "error"})`);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return bad("is not JSON");
    }
    const bytes =
      Array.isArray(json) &&
      json.length === 64 &&
      json.every((byte) => typeof byte === "number" && Number.isInteger(byte) && byte >= 0 && byte <= 255);
    if (!bytes) return bad("is not a JSON array of 64 bytes");
    try {
      return ok({ path, keypair: Keypair.fromSecretKey(Uint8Array.from(json as number[])) });
    } catch {
      return bad("holds a public key that does not match its secret key");
    }
  },
};

/** 32 bytes as base64 (or, when `hex`, also as 64 hex digits). */
export function key32(hex: boolean): Parser<string> {
  return {
    expected: hex
      ? "32 random bytes as base64 or 64 hex digits (openssl rand -base64 32)"
      : "32 random bytes as base64 (openssl rand -base64 32)",
    secret: true,
    parse(text) {
      if (hex && /^[0-9a-fA-F]{64}$/.test(text)) return ok(text);
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return bad("is not base64");
      return Buffer.from(text, "base64").length === 32 ? ok(text) : bad("does not decode to 32 bytes");
    },
  };
}

/** `version:base64,version:base64`, each key 32 bytes. */
export const retiredKeys: Parser<string> = {
  expected: "version:base64 entries of 32-byte keys separated by commas",
  secret: true,
  parse(text) {
    for (const entry of text.split(",").filter((part) => part.trim() !== "")) {
      const at = entry.indexOf(":");
      if (at <= 0) return bad("has an entry without version:");
      const key = entry.slice(at + 1).trim();
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(key) || Buffer.from(key, "base64").length !== 32) {
        return bad(`has key ${entry.slice(0, at).trim()} that is not 32 bytes of base64`);
      }
    }
    return ok(text);
  },
};

export function oneOf<T extends string>(values: readonly T[]): Parser<T> {
  return {
    expected: `one of ${values.join(", ")}`,
    parse: (text) => ((values as readonly string[]).includes(text) ? ok(text as T) : bad("is not a known value")),
  };
}

export function integer(min: number, max: number, what: string): Parser<number> {
  return {
    expected: `${what}, an integer ${min}..${max}`,
    parse(text) {
      if (!/^\d+$/.test(text)) return bad("is not an integer");
      const value = Number(text);
      return value >= min && value <= max ? ok(value) : bad("is out of range");
    },
  };
}

export const port = integer(0, 65_535, "a TCP port");

export const nonEmpty: Parser<string> = { expected: "a non-empty value", parse: (text) => ok(text) };

/** SOL as a decimal string (up to 9 fractional digits), to lamports. */
export const solAmount: Parser<bigint> = {
  expected: "an amount of SOL such as 0.05",
  parse(text) {
    const match = /^(\d{1,12})(?:\.(\d{1,9}))?$/.exec(text);
    if (match === null) return bad("is not a decimal amount with at most 9 decimals");
    return ok(BigInt(match[1]!) * 1_000_000_000n + BigInt((match[2] ?? "").padEnd(9, "0")));
  },
};

/** An explorer cluster: a public cluster's name or an RPC URL. */
export const explorerCluster: Parser<string> = {
  expected: "mainnet-beta, devnet, testnet or an http(s):// RPC URL",
  parse(text) {
    if (["mainnet-beta", "devnet", "testnet"].includes(text)) return ok(text);
    const parsed = httpUrl.parse(text);
    return parsed.ok ? parsed : bad("is neither a cluster name nor an http(s) URL");
  },
};
