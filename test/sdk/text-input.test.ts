/**
 * The client's text rule (text-input.ts) and a property test: random Unicode (NUL and other
 * controls, lone surrogates, astral characters, very long strings) in every text input of the
 * client never crashes it with anything but its own typed errors, and a value the gateway cannot
 * store never reaches the network. The network here is a recording `fetch` answering a fixed
 * problem (a stand-in for the gateway: only what leaves the client is under test).
 */
import { describe, expect, it } from "vitest";
import { mulberry32 } from "../support/random.js";
import { Client } from "../../sdk/src/client.js";
import { ServiceError } from "../../sdk/src/errors.js";
import { MoneyFormatError } from "../../sdk/src/money.js";
import { checkTexts, findUnstorable, InvalidInputError } from "../../sdk/src/text-input.js";

describe("findUnstorable", () => {
  it.each([
    ["plain", null],
    ["émoji 😀 and 中文", null],
    ["\u00a0 no-break space and \ufffd", null],
    ["c1\u0085", "U+0085"],
    ["c1\u009f", "U+009F"],
    ["a\u0000b", "U+0000"],
    ["tab\there", "U+0009"],
    ["line\nbreak", "U+000A"],
    ["del\u007f", "U+007F"],
    ["high\ud83d", "U+D83D"],
    ["\ude00low", "U+DE00"],
    ["😀\ud83d", "U+D83D"],
  ])("%j → %s", (text, code) => {
    const found = findUnstorable(text);
    if (code === null) expect(found).toBeNull();
    else expect(found?.character).toContain(code);
  });

  it("names the path of a nested field", () => {
    expect(() => checkTexts("", { policy: { allowedDomains: ["ok.com", "bad\u0000.com"] } })).toThrow(
      expect.objectContaining({ field: "policy.allowedDomains[1]", code: "BAD_USER_INPUT" }),
    );
    expect(() => checkTexts("", { "key\u0001": 1 })).toThrow(InvalidInputError);
    expect(new InvalidInputError("name", "x")).toBeInstanceOf(TypeError);
  });
});

const ALPHABET = [
  () => "a",
  () => "é",
  () => "😀",
  () => "\u0000",
  () => "\u001f",
  () => "\u007f",
  () => "\ud800",
  () => "\udfff",
  () => ".",
  () => "-",
  () => "/",
  () => "%",
  () => " ",
];

function randomText(next: () => number): string {
  const roll = next();
  if (roll < 0.05) return "x".repeat(10_000 + Math.floor(next() * 100_000));
  let text = "";
  const length = Math.floor(next() * 24);
  for (let i = 0; i < length; i += 1) {
    text += next() < 0.5 ? ALPHABET[Math.floor(next() * ALPHABET.length)]!() : String.fromCharCode(Math.floor(next() * 0x10000));
  }
  return text;
}

describe("random Unicode in every text input", () => {
  it("throws only the client's typed errors and never sends an unstorable value", async () => {
    const next = mulberry32(25);
    const sent: string[] = [];
    const client = new Client({
      agentId: "prop-agent",
      apiKey: "k".repeat(16),
      maxRetries: 0,
      fetch: async (input, init) => {
        sent.push(`${String(input)} ${typeof init?.body === "string" ? init.body : ""}`);
        return new Response(JSON.stringify({ code: "BAD_USER_INPUT", detail: "refused by the stand-in" }), {
          status: 400,
          headers: { "content-type": "application/problem+json" },
        });
      },
    });
    const operations: Array<(text: string) => Promise<unknown>> = [
      (text) => client.agents.create({ agentId: text }),
      (text) => client.agents.create({ agentId: "ok", name: text }),
      (text) => client.agents.get(text),
      (text) => client.agents.archive(text),
      (text) => client.policies.set({ allowedDomains: [text] }),
      (text) => client.policies.set({ blockedDomains: ["ok.com", text] }),
      (text) => client.transactions.list({ domain: text }),
      (text) => client.transactions.list({ since: text }),
      (text) => client.transactions.get(text),
      (text) => client.transactions.getChain(text),
      (text) => client.wallet.withdraw({ to: text, usdc: 1 }),
      (text) => client.wallet.operation(text),
      (text) => client.pay({ endpoint: `https://api.example.com/${text}` }),
      (text) => client.pay({ endpoint: text }),
      (text) => client.pay({ endpoint: "https://api.example.com/", headers: { "x-note": text } }),
      (text) => client.pay({ endpoint: "https://api.example.com/", method: text }),
    ];
    for (let run = 0; run < 600; run += 1) {
      const text = randomText(next);
      const operation = operations[run % operations.length]!;
      const before = sent.length;
      const error = await operation(text).then(
        () => null,
        (caught: unknown) => caught,
      );
      const typed = error instanceof ServiceError || error instanceof TypeError || error instanceof MoneyFormatError;
      expect(error === null || typed, `run ${run}: ${String(error)}`).toBe(true);
      if (findUnstorable(text) !== null) {
        expect(sent.length, `run ${run} sent ${JSON.stringify(text.slice(0, 40))}`).toBe(before);
        expect(error).toBeInstanceOf(TypeError);
      }
    }
    // Every request that left carried only storable text.
    for (const request of sent) expect(findUnstorable(decodeURIComponent(request.replace(/%(?![0-9a-f]{2})/gi, "%25")))).toBeNull();
  });
});
