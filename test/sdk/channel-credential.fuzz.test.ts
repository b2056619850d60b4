/**
 * The payee's session credential under random mutation: a valid voucher credential with one
 * field replaced (odd values, other numbers, flipped signature or digest characters) is never
 * served, and the gate answers a refusal (402/410 with a problem code), never an exception; the
 * untouched credential is then still accepted (a refusal changed nothing). Reproducible: xorshift32.
 */
import { BorshCoder } from "@coral-xyz/anchor";
import anchor from "@coral-xyz/anchor";
import { Keypair, PublicKey } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import {
  advanceVoucher,
  endpointHash,
  initialChargesDigest,
  PAYMENT_LEDGER_IDL,
  PAYMENT_LEDGER_PROGRAM_ID,
  signVoucher,
  voucherMessage,
} from "../../programs/payment_ledger/ts/index.js";
import { base58Encode } from "../../sdk/src/server/channel/base58.js";
import { endpointText } from "../../sdk/src/server/channel/voucher.js";
import { ChannelBook, MemoryVoucherJournal, mppHandler, SESSION_ERRORS } from "../../sdk/src/server/index.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const URL_PAID = "https://api.example.com/v1/paid";
const PRICE = 10_000n;

function random(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
}

const ODD: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  "",
  "0",
  "01",
  "18446744073709551616",
  "99999999999999999999",
  "-1",
  [],
  {},
  "x".repeat(3_000),
  "1e3",
  "https://api.exa mple.com/v1/paid",
];

describe("session credentials under mutation", () => {
  it("no mutated credential is served; each is refused with a session problem code; the original still pays", async () => {
    const payer = Keypair.generate();
    const payee = Keypair.generate();
    const channel = Keypair.generate().publicKey;
    const data = await coder.accounts.encode("Channel", {
      payer: payer.publicKey,
      payee: payee.publicKey,
      mint: PublicKey.default,
      channel_id: new Array(32).fill(7),
      rent_payer: PublicKey.default,
      invocation: null,
      protocol: { Mpp: {} },
      deposit: new BN(1_000_000),
      settled: new BN(0),
      sequence: new BN(0),
      charges_digest: Array.from(initialChargesDigest(channel, 5n)),
      last_payment_id: new BN(0),
      opened_at: new BN(1),
      opened_slot: new BN(5),
      expires_at: new BN(Math.floor(Date.now() / 1000) + 3_600),
      withdraw_delay: new BN(60),
      close_requested_at: new BN(0),
      bump: 255,
      escrow_bump: 254,
    });
    const fetchDouble = async (url: string) =>
      url === "http://ledger.test"
        ? Response.json({
            jsonrpc: "2.0",
            id: 1,
            result: { value: { owner: PAYMENT_LEDGER_PROGRAM_ID.toBase58(), data: [data.toString("base64"), "base64"] } },
          })
        : new Response("not found", { status: 404 });
    const book = new ChannelBook({
      payTo: payee.publicKey.toBase58(),
      facilitatorUrl: "http://gateway.test",
      apiKey: "k",
      ledger: { rpcUrl: "http://ledger.test", programId: PAYMENT_LEDGER_PROGRAM_ID.toBase58() },
      mint: PublicKey.default.toBase58(),
      journal: new MemoryVoucherJournal(),
      settlement: { intervalMs: 0 },
      fetch: fetchDouble,
    });
    await book.start();
    let served = 0;
    const handler = mppHandler(
      {
        amount: PRICE,
        paymentMethods: ["stablecoin"],
        sessionSupported: true,
        payTo: payee.publicKey.toBase58(),
        facilitatorUrl: "http://gateway.test",
        apiKey: "k",
        channels: book,
        fetch: fetchDouble,
      },
      () => {
        served++;
        return Response.json({});
      },
    );
    const header = (await handler(new Request(URL_PAID))).headers.get("www-authenticate")!;
    const params = Object.fromEntries([...header.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    const challenge = {
      id: params.id,
      realm: params.realm,
      method: "solana",
      intent: "session",
      request: params.request,
      expires: params.expires,
    };
    const voucher = advanceVoucher({ cumulativeUnits: 0n, sequence: 0n, chargesDigest: initialChargesDigest(channel, 5n) }, [
      { paymentId: 1n, amountUnits: PRICE, endpointHash: endpointHash(URL_PAID) },
    ]);
    const valid = {
      challenge,
      payload: {
        action: "open",
        channelId: channel.toBase58(),
        voucher: {
          channelId: channel.toBase58(),
          cumulativeAmount: "10000",
          sequence: "1",
          paymentId: "1",
          amount: "10000",
          endpoint: URL_PAID,
          digest: Buffer.from(voucher.chargesDigest).toString("hex"),
        },
        signer: payer.publicKey.toBase58(),
        signature: base58Encode(signVoucher(payer, voucherMessage(channel, voucher))),
        signatureType: "ed25519",
      },
    } as const;
    const send = (credential: unknown) =>
      handler(
        new Request(URL_PAID, { headers: { authorization: `Payment ${Buffer.from(JSON.stringify(credential)).toString("base64url")}` } }),
      );

    const next = random(16);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)]!;
    const paths: string[][] = [
      ["challenge", "id"],
      ["challenge", "realm"],
      ["challenge", "method"],
      ["challenge", "request"],
      ["challenge", "expires"],
      ["payload", "action"],
      ["payload", "channelId"],
      ["payload", "signer"],
      ["payload", "signature"],
      ["payload", "signatureType"],
      ...["channelId", "cumulativeAmount", "sequence", "paymentId", "amount", "endpoint", "digest"].map((f) => ["payload", "voucher", f]),
    ];
    const codes = new Set<string>();
    for (let i = 0; i < 300; i++) {
      const credential = structuredClone(valid) as unknown as Record<string, Record<string, unknown>>;
      const path = pick(paths);
      let holder: Record<string, unknown> = credential;
      for (const key of path.slice(0, -1)) holder = holder[key] as Record<string, unknown>;
      const field = path.at(-1)!;
      const current = holder[field];
      const mode = next();
      if (mode < 0.4) holder[field] = pick(ODD);
      else if (mode < 0.7 && typeof current === "string" && current.length > 0) {
        // One character changed (a flipped signature, digest or amount digit).
        const at = Math.floor(next() * current.length);
        const alphabet = /^[0-9]+$/.test(current)
          ? "0123456789"
          : /^[0-9a-f]+$/.test(current)
            ? "0123456789abcdef"
            : "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
        let replacement = current[at]!;
        while (replacement === current[at]) replacement = pick([...alphabet]);
        holder[field] = current.slice(0, at) + replacement + current.slice(at + 1);
      } else delete holder[field];
      // The endpoint's identity is host + path (spec 2.2; that is what the digest hashes): a
      // mutation of its scheme alone names the same endpoint and is no mutation.
      const endpoint = (credential.payload!.voucher as Record<string, unknown> | undefined)?.endpoint;
      if (typeof endpoint === "string" && endpoint !== URL_PAID && endpointText(endpoint) === endpointText(URL_PAID)) continue;
      if (JSON.stringify(credential) === JSON.stringify(valid)) continue;
      const answer = await send(credential);
      const code = answer.headers.get("x-mpp-error");
      expect([402, 410]).toContain(answer.status);
      expect(code !== null && (code in SESSION_ERRORS || code === "malformed_headers")).toBe(true);
      codes.add(code!);
    }
    expect(served).toBe(0);
    expect(codes.size).toBeGreaterThan(4);
    expect((await send(valid)).status).toBe(200);
    expect(served).toBe(1);
  });
});
