/**
 * Every argument parser, fed random text: it returns a value of its type or throws
 * BAD_USER_INPUT naming the argument — never another exception. Seeded, so a failure replays.
 */
import { describe, expect, it } from "vitest";
import { isApiError } from "../../api/shared/errors.js";
import {
  parseAgentId,
  parseAmount,
  parseCursor,
  parseDateTime,
  parseMetricNames,
  parseResolution,
  parseSince,
  parseTxHash,
  parseWindow,
} from "../../api/shared/validation.js";

const NOW = new Date("2026-03-10T12:34:56.789Z");
const ALPHABET = "0123456789abcdefABCDEFmhdsT:Z.+- _/\\\\\\u0000é1111111111111111zzzz=";

function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

function text(next: () => number): string {
  const length = Math.floor(next() * 100);
  let out = "";
  for (let i = 0; i < length; i++) out += ALPHABET[Math.floor(next() * ALPHABET.length)];
  return out;
}

const PARSERS: Record<string, (input: string) => unknown> = {
  txHash: (input) => parseTxHash("txHash", input),
  agentId: (input) => parseAgentId("agentId", input),
  amount: (input) => parseAmount("amount", input),
  cursor: (input) => parseCursor("after", input),
  since: (input) => parseSince("since", input, NOW),
  dateTime: (input) => parseDateTime("from", input),
  window: (input) => parseWindow(input, null, NOW),
  range: (input) => parseWindow(null, { from: input, to: input }, NOW),
  resolution: (input) => parseResolution(input, parseWindow("24h", null, NOW)),
  metrics: (input) => parseMetricNames(input.split(",")),
};

describe("argument parsers under random input", () => {
  for (const [name, parse] of Object.entries(PARSERS)) {
    it(`${name}: a value or BAD_USER_INPUT, nothing else`, () => {
      const next = random(0x5eed + name.length);
      for (let i = 0; i < 2_000; i++) {
        const input = text(next);
        try {
          parse(input);
        } catch (error) {
          if (!isApiError(error, "BAD_USER_INPUT")) throw new Error(`${name}(${JSON.stringify(input)}) threw ${String(error)}`);
          expect(error.extensions.argument).toBeTypeOf("string");
        }
      }
    });
  }
});
