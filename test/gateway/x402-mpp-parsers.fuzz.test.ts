/**
 * The protocol parsers under random input: mutations of valid 402 bodies, payloads and
 * submissions either parse into values that re-serialize to themselves or fail with the
 * protocol's format error, never with anything else (no TypeError, no silent coercion).
 */
import { Keypair } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { MppFormatError, parseMppPaymentRequest, parseMppSubmission, mppRequestBody, submissionBody } from "../../api/gateway/mpp/index.js";
import {
  parsePaymentPayload,
  parsePaymentRequirement,
  payloadBody,
  requirementBody,
  X402FormatError,
} from "../../api/gateway/x402/index.js";

/** xorshift32: reproducible without a dependency. */
function random(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
}

const ODD_VALUES: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  "",
  " ",
  "0",
  "01",
  "1e3",
  "0.0000001",
  "-5",
  "NaN",
  [],
  {},
  "x".repeat(3000),
  "mpp/1.0",
  "exact",
  "é",
];

function mutate(value: unknown, next: () => number, depth = 0): unknown {
  if (value === null || typeof value !== "object" || depth > 3) return ODD_VALUES[Math.floor(next() * ODD_VALUES.length)];
  const copy: Record<string, unknown> = Array.isArray(value) ? { ...value } : { ...(value as Record<string, unknown>) };
  const keys = Object.keys(copy);
  const roll = next();
  if (roll < 0.15 && keys.length > 0) delete copy[keys[Math.floor(next() * keys.length)]!];
  else if (roll < 0.25) copy[`extra${Math.floor(next() * 3)}`] = 1;
  else if (keys.length > 0) {
    const key = keys[Math.floor(next() * keys.length)]!;
    copy[key] = next() < 0.5 ? mutate(copy[key], next, depth + 1) : ODD_VALUES[Math.floor(next() * ODD_VALUES.length)];
  }
  return Array.isArray(value) ? Object.values(copy) : copy;
}

/**
 * 500 mutations of `base`: each parses and round-trips, or throws `errorClass`. Answers how many
 * did which, so a test can prove both paths ran (a parser that refused everything, or a mutator
 * that never broke anything, would otherwise pass silently). The base itself must round-trip.
 */
function check<T>(
  parse: (json: unknown) => T,
  write: (value: T) => unknown,
  errorClass: new (...args: never[]) => Error,
  base: unknown,
  seed: number,
): { parsed: number; refused: number } {
  const roundTrip = (value: T) => expect(parse(JSON.parse(JSON.stringify(write(value))))).toEqual(value);
  roundTrip(parse(base));
  const next = random(seed);
  const counts = { parsed: 0, refused: 0 };
  for (let i = 0; i < 500; i += 1) {
    const input = mutate(base, next);
    let parsed: T;
    try {
      parsed = parse(input);
    } catch (error) {
      if (!(error instanceof errorClass)) throw new Error(`input ${JSON.stringify(input)} threw ${String(error)}`);
      counts.refused += 1;
      continue;
    }
    roundTrip(parsed);
    counts.parsed += 1;
  }
  return counts;
}

/** Both outcomes occurred: some mutations stayed valid (the round trip ran), most were refused. */
function expectBothPaths(counts: { parsed: number; refused: number }): void {
  expect(counts.parsed, JSON.stringify(counts)).toBeGreaterThan(0);
  expect(counts.refused, JSON.stringify(counts)).toBeGreaterThan(counts.parsed);
}

const a = Keypair.generate().publicKey.toBase58();
const b = Keypair.generate().publicKey.toBase58();
const signature = "5".repeat(87);

describe("protocol parsers under random mutation", () => {
  it("x402 requirement: parses or throws X402FormatError", () => {
    const body = { scheme: "exact", network: "solana-mainnet", token: a, amount: "10000", payTo: b, resource: "https://x.example/p" };
    expectBothPaths(check(parsePaymentRequirement, requirementBody, X402FormatError, body, 1));
  });

  it("x402 payload: parses or throws X402FormatError", () => {
    const body = {
      scheme: "exact",
      network: "solana-mainnet",
      payload: { from: a, to: b, amount: "10000", token: a, nonce: "n".repeat(32), validUntil: "1800000000" },
      signature,
    };
    expectBothPaths(check(parsePaymentPayload, payloadBody, X402FormatError, body, 2));
  });

  it("MPP request and submission: parse or throw MppFormatError", () => {
    const request = {
      protocol: "mpp/1.0",
      amount: { value: "0.05", currency: "USDC" },
      paymentMethods: ["stablecoin", "card"],
      sessionSupported: true,
      paymentEndpoint: "https://x.example/pay",
    };
    expectBothPaths(check(parseMppPaymentRequest, mppRequestBody, MppFormatError, request, 3));
    const submission = {
      method: "stablecoin",
      amount: { value: "0.05", currency: "USDC" },
      authorization: {
        type: "ed25519",
        payer: a,
        resource: "https://x.example/p",
        nonce: "n".repeat(32),
        validUntil: "1800000000",
        signature,
      },
    };
    expectBothPaths(check(parseMppSubmission, submissionBody, MppFormatError, submission, 4));
  });
});
