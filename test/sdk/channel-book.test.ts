/**
 * The payee side of channel sessions without a ledger or gateway (a fetch double answers the
 * Channel account read and the settlement route): the voucher bytes against the program's own
 * binding, every refusal with real ed25519 signatures, batching, journal replay, the file
 * journal's group commit and torn tail, and both wires (MPP session intent, x402 upto) through the
 * fetch-style handlers. Lives in test/ because it signs with programs/payment_ledger/ts, which
 * the SDK may not import.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair, PublicKey } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import {
  advanceVoucher,
  decodeChannelAccount,
  endpointHash as programEndpointHash,
  initialChargesDigest,
  PAYMENT_LEDGER_IDL,
  PAYMENT_LEDGER_PROGRAM_ID,
  signVoucher,
  type Voucher,
  voucherMessage as programVoucherMessage,
} from "../../programs/payment_ledger/ts/index.js";
import { decodeChannel } from "../../sdk/src/server/channel/account.js";
import { base58Decode, base58Encode } from "../../sdk/src/server/channel/base58.js";
import { ChannelBook, type PresentedVoucher } from "../../sdk/src/server/channel/book.js";
import { SessionVoucherError } from "../../sdk/src/server/channel/errors.js";
import { crc32, decodeJournal, FileVoucherJournal, MemoryVoucherJournal } from "../../sdk/src/server/channel/journal.js";
import { endpointHash, initialDigest, voucherMessage } from "../../sdk/src/server/channel/voucher.js";
import { mppHandler, x402Handler } from "../../sdk/src/server/index.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const PRICE = 10_000n;
const SEARCH = "https://api.example.com/v1/search";
const QUOTE = "https://api.example.com/v1/quote";
const NOW_SECONDS = 1_900_000_000;

interface Fixture {
  readonly payer: Keypair;
  readonly payee: Keypair;
  readonly channel: PublicKey;
  readonly openedSlot: bigint;
  depositUnits: bigint;
  closeRequestedAt: number;
  accountReads: number;
  readonly settlements: Array<{ channel: string; body: Record<string, unknown> }>;
  settlementStatus: number;
}

function fixture(depositUnits = 100_000n): Fixture {
  return {
    payer: Keypair.generate(),
    payee: Keypair.generate(),
    channel: Keypair.generate().publicKey,
    openedSlot: 77n,
    depositUnits,
    closeRequestedAt: 0,
    accountReads: 0,
    settlements: [],
    settlementStatus: 200,
  };
}

async function accountData(f: Fixture, payee = f.payee.publicKey): Promise<Buffer> {
  return coder.accounts.encode("Channel", {
    payer: f.payer.publicKey,
    payee,
    mint: PublicKey.default,
    channel_id: Array.from(randomBytes(32)),
    rent_payer: PublicKey.default,
    invocation: null,
    protocol: { Mpp: {} },
    deposit: new BN(f.depositUnits.toString()),
    settled: new BN(0),
    sequence: new BN(0),
    charges_digest: Array.from(initialChargesDigest(f.channel, f.openedSlot)),
    last_payment_id: new BN(0),
    opened_at: new BN(NOW_SECONDS - 10),
    opened_slot: new BN(f.openedSlot.toString()),
    expires_at: new BN(NOW_SECONDS + 3_600),
    withdraw_delay: new BN(60),
    close_requested_at: new BN(f.closeRequestedAt),
    bump: 255,
    escrow_bump: 254,
  });
}

/** Ledger RPC and gateway in one fetch: the account read, and the settlements presented. */
function fakeFetch(f: Fixture, payee?: PublicKey) {
  return async (url: string, init?: RequestInit): Promise<Response> => {
    const body = JSON.parse(String(init?.body ?? "{}")) as Record<string, unknown>;
    if (url === "http://ledger.test") {
      f.accountReads++;
      const data = await accountData(f, payee);
      const value = { owner: PAYMENT_LEDGER_PROGRAM_ID.toBase58(), data: [data.toString("base64"), "base64"] };
      return Response.json({ jsonrpc: "2.0", id: 1, result: { value } });
    }
    const match = /\/v1\/channels\/([^/]+)\/settlements$/.exec(url);
    if (match === null) return new Response("not found", { status: 404 });
    f.settlements.push({ channel: match[1]!, body });
    if (f.settlementStatus !== 200) return Response.json({ code: "nope" }, { status: f.settlementStatus });
    return Response.json({
      channel: match[1],
      acceptedCumulative: body.cumulative,
      acceptedSequence: body.sequence,
      settledCumulative: body.cumulative,
      settledSequence: body.sequence,
      settlementTxs: [`tx-${f.settlements.length}`],
    });
  };
}

function book(
  f: Fixture,
  options: {
    journal?: MemoryVoucherJournal | FileVoucherJournal;
    maxCharges?: number;
    maxUnits?: bigint;
    intervalMs?: number;
    nowSeconds?: number;
    payee?: PublicKey;
  } = {},
) {
  return new ChannelBook({
    payTo: f.payee.publicKey.toBase58(),
    facilitatorUrl: "http://gateway.test",
    apiKey: "payee-key",
    ledger: { rpcUrl: "http://ledger.test", programId: PAYMENT_LEDGER_PROGRAM_ID.toBase58() },
    journal: options.journal ?? new MemoryVoucherJournal(),
    settlement: {
      maxCharges: options.maxCharges ?? 100,
      intervalMs: options.intervalMs ?? 0,
      ...(options.maxUnits === undefined ? {} : { maxUnits: options.maxUnits }),
    },
    fetch: fakeFetch(f, options.payee),
    now: () => (options.nowSeconds ?? NOW_SECONDS) * 1000,
  });
}

/** The payer's side, signing with the program's own binding (the bytes the ledger verifies). */
class Payer {
  voucher: Voucher;
  nextPaymentId = 1n;
  constructor(readonly f: Fixture) {
    this.voucher = { cumulativeUnits: 0n, sequence: 0n, chargesDigest: initialChargesDigest(f.channel, f.openedSlot) };
  }

  sign(endpoint = SEARCH, amountUnits = PRICE, options: { signer?: Keypair; digestEndpoint?: string } = {}): PresentedVoucher {
    const paymentId = this.nextPaymentId++;
    this.voucher = advanceVoucher(this.voucher, [
      { paymentId, amountUnits, endpointHash: programEndpointHash(options.digestEndpoint ?? endpoint) },
    ]);
    const signer = options.signer ?? this.f.payer;
    const signature = signVoucher(signer, programVoucherMessage(this.f.channel, this.voucher));
    return {
      channel: this.f.channel.toBase58(),
      cumulativeUnits: this.voucher.cumulativeUnits,
      sequence: this.voucher.sequence,
      paymentId,
      amountUnits,
      endpoint,
      digest: this.voucher.chargesDigest,
      signer: this.f.payer.publicKey.toBase58(),
      signature: base58Encode(signature),
    };
  }
}

async function refusal(attempt: Promise<unknown>): Promise<string> {
  try {
    await attempt;
  } catch (error) {
    if (error instanceof SessionVoucherError) return error.code;
    throw error;
  }
  throw new Error("the voucher was accepted");
}

const at = { endpoint: SEARCH, priceUnits: PRICE };

describe("the payee's voucher bytes", () => {
  it("are the program binding's: message, initial digest and endpoint hash agree byte for byte", () => {
    const channel = Keypair.generate().publicKey;
    const state = { cumulativeUnits: 123_456n, sequence: 9n, chargesDigest: randomBytes(32) };
    const ours = voucherMessage(channel.toBytes(), { cumulativeUnits: 123_456n, sequence: 9n, digest: state.chargesDigest });
    expect(Buffer.from(ours).equals(Buffer.from(programVoucherMessage(channel, state)))).toBe(true);
    expect(Buffer.from(initialDigest(channel.toBytes(), 42n)).equals(Buffer.from(initialChargesDigest(channel, 42n)))).toBe(true);
    expect(Buffer.from(endpointHash(SEARCH)).equals(Buffer.from(programEndpointHash(SEARCH)))).toBe(true);
  });

  it("base58 round-trips addresses and signatures, leading zeros included", () => {
    for (const bytes of [Keypair.generate().publicKey.toBytes(), new Uint8Array(32), Uint8Array.from([0, 0, 1, 2]), randomBytes(64)]) {
      expect(Buffer.from(base58Decode(base58Encode(bytes))!).equals(Buffer.from(bytes))).toBe(true);
    }
    const key = Keypair.generate().publicKey;
    expect(base58Encode(key.toBytes())).toBe(key.toBase58());
    expect(base58Decode("0OIl")).toBeUndefined();
  });

  it("the Channel account decodes like the program's IDL decoder, closing state included", async () => {
    const f = fixture(9_007_199_254_740_993n);
    f.closeRequestedAt = 1_900_000_100;
    const data = await accountData(f);
    const ours = decodeChannel(data);
    const theirs = decodeChannelAccount(data);
    expect(ours.payer).toBe(theirs.payer.toBase58());
    expect(ours.payee).toBe(theirs.payee.toBase58());
    expect(ours.depositUnits).toBe(theirs.depositUnits);
    expect(ours.openedSlot).toBe(theirs.openedSlot);
    expect(ours.expiresAtSeconds).toBe(theirs.expiresAtSeconds);
    expect(ours.closeRequestedAtSeconds).toBe(theirs.closeRequestedAtSeconds);
    expect(Buffer.from(ours.settled.digest).equals(Buffer.from(theirs.settled.chargesDigest))).toBe(true);
    expect(() => decodeChannel(Buffer.alloc(300))).toThrow(/not a Channel account/);
  });
});

describe("a payee accepting vouchers locally", () => {
  it("accepts a chain of vouchers after one ledger read, each durable before it is acknowledged", async () => {
    const f = fixture();
    const journal = new MemoryVoucherJournal();
    const payee = book(f, { journal });
    await payee.start();
    const payer = new Payer(f);
    for (let i = 1; i <= 3; i++) {
      const accepted = await payee.accept(payer.sign(), at);
      expect(accepted.acceptedCumulativeUnits).toBe(BigInt(i) * PRICE);
      expect(journal.records.filter((r) => r.kind === "voucher")).toHaveLength(i);
    }
    expect(f.accountReads).toBe(1);
    expect(payee.state(f.channel.toBase58())).toMatchObject({ acceptedSequence: 3n, pendingCharges: 3, confirmedSequence: 0n });
  });

  it("refuses a voucher signed by another key, and one naming another signer", async () => {
    const f = fixture();
    const payee = book(f);
    await payee.start();
    const forged = new Payer(f).sign(SEARCH, PRICE, { signer: Keypair.generate() });
    expect(await refusal(payee.accept(forged, at))).toBe("invalid-signature");
    const other = Keypair.generate();
    const voucher = new Payer(f).sign();
    expect(await refusal(payee.accept({ ...voucher, signer: other.publicKey.toBase58() }, at))).toBe("signer-mismatch");
    // Nothing was accepted: the honest first voucher still is.
    expect((await payee.accept(voucher, at)).sequence).toBe(1n);
  });

  it("refuses a replayed voucher, a lower one and a skipped sequence", async () => {
    const f = fixture();
    const payee = book(f);
    await payee.start();
    const payer = new Payer(f);
    const first = payer.sign();
    const second = payer.sign();
    await payee.accept(first, at);
    await payee.accept(second, at);
    expect(await refusal(payee.accept(second, at))).toBe("sequence-mismatch");
    expect(await refusal(payee.accept(first, at))).toBe("sequence-mismatch");
    payer.sign(); // the third is never presented
    expect(await refusal(payee.accept(payer.sign(), at))).toBe("sequence-mismatch");
    expect(payee.state(f.channel.toBase58())?.acceptedCumulativeUnits).toBe(2n * PRICE);
  });

  it("refuses a voucher whose digest was advanced by another endpoint, or that names another endpoint", async () => {
    const f = fixture();
    const payee = book(f);
    await payee.start();
    const digestOfQuote = new Payer(f).sign(SEARCH, PRICE, { digestEndpoint: QUOTE });
    expect(await refusal(payee.accept(digestOfQuote, at))).toBe("digest-mismatch");
    const forQuote = new Payer(f).sign(QUOTE);
    expect(await refusal(payee.accept(forQuote, at))).toBe("endpoint-mismatch");
    // The query string is not part of the endpoint (spec 2.2: host and path).
    expect((await payee.accept(new Payer(f).sign(SEARCH), { endpoint: `${SEARCH}?q=1`, priceUnits: PRICE })).sequence).toBe(1n);
  });

  it("refuses a voucher over the deposit, and one paying another amount than the route's price", async () => {
    const f = fixture(25_000n);
    const payee = book(f);
    await payee.start();
    const payer = new Payer(f);
    await payee.accept(payer.sign(), at);
    await payee.accept(payer.sign(), at);
    expect(await refusal(payee.accept(payer.sign(), at))).toBe("amount-exceeds-deposit");
    const g = fixture();
    const other = book(g);
    await other.start();
    expect(await refusal(other.accept(new Payer(g).sign(SEARCH, PRICE - 1n), at))).toBe("amount-mismatch");
  });

  it("refuses vouchers within the safety margin of the channel's expiry", async () => {
    const f = fixture();
    const payee = book(f, { nowSeconds: NOW_SECONDS + 3_600 - 30 });
    await payee.start();
    expect(await refusal(payee.accept(new Payer(f).sign(), at))).toBe("channel-expired");
  });

  it("refuses a closing channel, a channel to another payee and an address with no channel", async () => {
    const closing = fixture();
    closing.closeRequestedAt = NOW_SECONDS - 5;
    const a = book(closing);
    await a.start();
    expect(await refusal(a.accept(new Payer(closing).sign(), at))).toBe("channel-finalized");

    const f = fixture();
    const b = book(f, { payee: Keypair.generate().publicKey });
    await b.start();
    expect(await refusal(b.accept(new Payer(f).sign(), at))).toBe("recipient-mismatch");

    const g = fixture();
    const c = new ChannelBook({
      payTo: g.payee.publicKey.toBase58(),
      facilitatorUrl: "http://gateway.test",
      apiKey: "k",
      ledger: { rpcUrl: "http://ledger.test", programId: PAYMENT_LEDGER_PROGRAM_ID.toBase58() },
      journal: new MemoryVoucherJournal(),
      settlement: { intervalMs: 0 },
      fetch: async () => Response.json({ jsonrpc: "2.0", id: 1, result: { value: null } }),
    });
    await c.start();
    expect(await refusal(c.accept(new Payer(g).sign(), at))).toBe("channel-not-found");
  });

  it("the same voucher presented twice at once is accepted once (vouchers are serialized per channel)", async () => {
    const f = fixture();
    const payee = book(f);
    await payee.start();
    const voucher = new Payer(f).sign();
    const results = await Promise.allSettled([payee.accept(voucher, at), payee.accept(voucher, at), payee.accept(voucher, at)]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(f.accountReads).toBe(1);
  });
});

describe("settlement of accepted vouchers", () => {
  it("presents the highest voucher and its charges once a batch is full, and records the confirmation", async () => {
    const f = fixture();
    const journal = new MemoryVoucherJournal();
    const payee = book(f, { journal, maxCharges: 3 });
    await payee.start();
    const payer = new Payer(f);
    for (let i = 0; i < 3; i++) await payee.accept(payer.sign(), at);
    await payee.flush(); // waits for the batch already under way
    expect(f.settlements).toHaveLength(1);
    const body = f.settlements[0]!.body;
    expect(body).toMatchObject({ cumulative: "30000", sequence: 3 });
    expect((body.charges as unknown[]).map((c) => (c as { paymentId: string }).paymentId)).toEqual(["1", "2", "3"]);
    expect(journal.records.at(-1)).toMatchObject({ kind: "settled", sequence: "3", transactions: ["tx-1"] });
    expect(payee.state(f.channel.toBase58())).toMatchObject({ pendingCharges: 0, confirmedCumulativeUnits: 30_000n });

    await payee.accept(payer.sign(QUOTE), { endpoint: QUOTE, priceUnits: PRICE });
    await payee.flush();
    expect(f.settlements[1]!.body).toMatchObject({ cumulative: "40000", sequence: 4, charges: [{ sequence: 4, paymentId: "4" }] });
  });

  it("settles once the money waiting reaches maxUnits, and on the timer whatever waits", async () => {
    const f = fixture();
    const byAmount = book(f, { maxUnits: 25_000n });
    await byAmount.start();
    const payer = new Payer(f);
    await byAmount.accept(payer.sign(), at);
    await byAmount.accept(payer.sign(), at);
    expect(f.settlements).toHaveLength(0);
    await byAmount.accept(payer.sign(), at); // 30,000 ≥ 25,000
    await byAmount.flush();
    expect(f.settlements.map((s) => s.body.cumulative)).toEqual(["30000"]);

    const g = fixture();
    const byTime = book(g, { intervalMs: 20 });
    await byTime.start();
    await byTime.accept(new Payer(g).sign(), at);
    const deadline = Date.now() + 5_000;
    while (g.settlements.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(g.settlements.map((s) => s.body.sequence)).toEqual([1]);
    await byTime.stop();
  });

  it("a restarted payee replays its journal and settles what was accepted but not confirmed, exactly once", async () => {
    const f = fixture();
    const journal = new MemoryVoucherJournal();
    const first = book(f, { journal });
    await first.start();
    const payer = new Payer(f);
    f.settlementStatus = 503; // the gateway is down: nothing confirmed
    for (let i = 0; i < 2; i++) await first.accept(payer.sign(), at);
    await expect(first.flush()).rejects.toThrow();

    f.settlementStatus = 200;
    const second = book(f, { journal });
    await second.start();
    expect(f.accountReads).toBe(1); // the journal's open record, not the ledger
    expect(f.settlements.at(-1)!.body).toMatchObject({ cumulative: "20000", sequence: 2 });
    const presented = f.settlements.length;
    const third = book(f, { journal });
    await third.start();
    expect(f.settlements).toHaveLength(presented); // confirmed in the journal: never presented again
    expect((await third.accept(payer.sign(), at)).acceptedCumulativeUnits).toBe(30_000n);
  });
});

describe("the file journal", () => {
  it("group-commits concurrent appends and replays them in order", async () => {
    const dir = await mkdtemp(join(tmpdir(), "journal-"));
    const journal = new FileVoucherJournal(join(dir, "vouchers.log"));
    expect(await journal.replay()).toEqual([]);
    const records = Array.from({ length: 50 }, (_, i) => ({
      kind: "settled" as const,
      channel: "c",
      sequence: String(i),
      cumulativeUnits: "1",
      transactions: [],
    }));
    await Promise.all(records.map((r) => journal.append(r)));
    expect(journal.syncs).toBeLessThan(50);
    await journal.close();
    const again = new FileVoucherJournal(join(dir, "vouchers.log"));
    expect(await again.replay()).toEqual(records);
    await again.close();
  });

  it("cuts a torn or corrupt tail at the last whole record", async () => {
    const dir = await mkdtemp(join(tmpdir(), "journal-"));
    const path = join(dir, "vouchers.log");
    const journal = new FileVoucherJournal(path);
    await journal.replay();
    const record = { kind: "settled" as const, channel: "c", sequence: "1", cumulativeUnits: "1", transactions: [] };
    await journal.append(record);
    await journal.close();
    const whole = await readFile(path);
    await writeFile(path, Buffer.concat([whole, Buffer.from('0badc0de {"kind":"voucher"')]));
    const reopened = new FileVoucherJournal(path);
    expect(await reopened.replay()).toEqual([record]);
    await reopened.append({ ...record, sequence: "2" });
    await reopened.close();
    expect(decodeJournal(await readFile(path)).records.map((r) => (r as { sequence: string }).sequence)).toEqual(["1", "2"]);
    // A flipped bit fails the CRC: replay stops before it.
    const bytes = await readFile(path);
    bytes[bytes.indexOf('"2"') + 1] = "3".charCodeAt(0);
    expect(decodeJournal(bytes).records).toHaveLength(1);
    expect(crc32(Buffer.from("123456789"))).toBe(0xcbf43926);
  });
});

describe("the session intent on the wire", () => {
  const ORIGIN = "https://api.example.com";

  async function wire(f: Fixture) {
    const payee = new ChannelBook({
      payTo: f.payee.publicKey.toBase58(),
      facilitatorUrl: "http://gateway.test",
      apiKey: "payee-key",
      ledger: { rpcUrl: "http://ledger.test", programId: PAYMENT_LEDGER_PROGRAM_ID.toBase58() },
      mint: PublicKey.default.toBase58(),
      journal: new MemoryVoucherJournal(),
      settlement: { intervalMs: 0 },
      fetch: fakeFetch(f),
    });
    await payee.start();
    let runs = 0;
    const common = {
      payTo: f.payee.publicKey.toBase58(),
      facilitatorUrl: "http://gateway.test",
      apiKey: "payee-key",
      origin: ORIGIN,
      channels: payee,
      // The gateway offers no standard terms here (404s): only the channel offers are added.
      fetch: fakeFetch(f),
    };
    const mpp = mppHandler({ ...common, amount: PRICE, paymentMethods: ["stablecoin"], sessionSupported: true }, () => {
      runs++;
      return Response.json({ ok: true });
    });
    const x402 = x402Handler(
      { ...common, amount: PRICE.toString(), token: PublicKey.default.toBase58(), network: "solana-localnet" },
      () => {
        runs++;
        return Response.json({ ok: true });
      },
    );
    return { payee, mpp, x402, runs: () => runs };
  }

  function voucherJson(v: PresentedVoucher) {
    return {
      voucher: {
        channelId: v.channel,
        cumulativeAmount: v.cumulativeUnits.toString(),
        sequence: v.sequence.toString(),
        paymentId: v.paymentId.toString(),
        amount: v.amountUnits.toString(),
        endpoint: v.endpoint,
        digest: Buffer.from(v.digest).toString("hex"),
      },
      signer: v.signer,
      signature: v.signature,
      signatureType: "ed25519",
    };
  }

  it("a 402 offers the solana session challenge; a voucher credential is served once with a Payment-Receipt", async () => {
    const f = fixture();
    const { mpp, runs } = await wire(f);
    const first = await mpp(new Request(SEARCH));
    expect(first.status).toBe(402);
    const header = first.headers.get("www-authenticate")!;
    expect(header).toMatch(/^Payment id="[^"]+", realm="api.example.com", method="solana", intent="session", request="[^"]+", expires="/);
    const params = Object.fromEntries([...header.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    expect(JSON.parse(Buffer.from(params.request!, "base64url").toString())).toEqual({
      amount: "10000",
      currency: PublicKey.default.toBase58(),
      recipient: f.payee.publicKey.toBase58(),
      methodDetails: { network: "localnet", channelProgram: PAYMENT_LEDGER_PROGRAM_ID.toBase58(), decimals: 6, voucherSigner: "client" },
    });
    const challenge = {
      id: params.id,
      realm: params.realm,
      method: "solana",
      intent: "session",
      request: params.request,
      expires: params.expires,
    };
    const payer = new Payer(f);
    const voucher = payer.sign();
    const credential = (action: string, v: PresentedVoucher, c: Record<string, unknown> = challenge) =>
      Buffer.from(JSON.stringify({ challenge: c, payload: { action, channelId: v.channel, ...voucherJson(v) } })).toString("base64url");
    const paid = await mpp(new Request(SEARCH, { headers: { authorization: `Payment ${credential("open", voucher)}` } }));
    expect(paid.status).toBe(200);
    const receipt = JSON.parse(Buffer.from(paid.headers.get("payment-receipt")!, "base64url").toString());
    expect(receipt).toMatchObject({
      method: "solana",
      intent: "session",
      status: "success",
      reference: f.channel.toBase58(),
      channelId: f.channel.toBase58(),
      acceptedCumulative: "10000",
      spent: "10000",
    });
    expect(runs()).toBe(1);

    // The same credential again: refused (sequence), the handler does not run, a fresh challenge comes with it.
    const replay = await mpp(new Request(SEARCH, { headers: { authorization: `Payment ${credential("voucher", voucher)}` } }));
    expect(replay.status).toBe(402);
    expect(replay.headers.get("x-mpp-error")).toBe("sequence-mismatch");
    expect(replay.headers.get("content-type")).toBe("application/problem+json");
    expect(await replay.json()).toMatchObject({ type: "https://paymentauth.org/problems/session/sequence-mismatch", status: 402 });
    expect(replay.headers.get("www-authenticate")).toMatch(/intent="session"/);
    // A challenge this service never issued.
    const forged = await mpp(
      new Request(SEARCH, { headers: { authorization: `Payment ${credential("voucher", payer.sign(), { ...challenge, id: "forged" })}` } }),
    );
    expect(forged.headers.get("x-mpp-error")).toBe("invalid-challenge");
    expect(runs()).toBe(1);
  });

  it("x402 v2: the 402 lists an upto requirement, and a PAYMENT-SIGNATURE carrying the voucher pays", async () => {
    const f = fixture();
    const { x402, runs } = await wire(f);
    const first = await x402(new Request(SEARCH));
    expect(first.status).toBe(402);
    const required = JSON.parse(Buffer.from(first.headers.get("payment-required")!, "base64").toString());
    const upto = required.accepts.find((r: { scheme: string }) => r.scheme === "upto");
    expect(upto).toEqual({
      scheme: "upto",
      network: "solana-localnet",
      amount: "10000",
      asset: PublicKey.default.toBase58(),
      payTo: f.payee.publicKey.toBase58(),
      maxTimeoutSeconds: 60,
      extra: {
        paymentFlow: "apg-channel-voucher",
        channelProgram: PAYMENT_LEDGER_PROGRAM_ID.toBase58(),
        voucherFormat: "payment_ledger:channel-voucher:v1",
      },
    });
    const payer = new Payer(f);
    const signature = (accepted: unknown, v: PresentedVoucher) =>
      Buffer.from(JSON.stringify({ x402Version: 2, accepted, payload: { channelId: v.channel, ...voucherJson(v) } })).toString("base64");
    const paid = await x402(new Request(SEARCH, { headers: { "payment-signature": signature(upto, payer.sign()) } }));
    expect(paid.status).toBe(200);
    expect(JSON.parse(Buffer.from(paid.headers.get("payment-response")!, "base64").toString())).toEqual({
      success: true,
      transaction: "",
      network: "solana-localnet",
      payer: f.payer.publicKey.toBase58(),
      extra: { channel: f.channel.toBase58(), sequence: "1", acceptedCumulative: "10000" },
    });
    // A payload that accepted cheaper terms is refused before any voucher check.
    const cheaper = await x402(
      new Request(SEARCH, { headers: { "payment-signature": signature({ ...upto, amount: "1" }, payer.sign()) } }),
    );
    expect(cheaper.status).toBe(402);
    expect(cheaper.headers.get("x-payment-error")).toBe("invalid-challenge");
    expect(runs()).toBe(1);
  });
});
