/**
 * Payees the ledger cannot credit safely are refused before anything is signed (api/gateway/settlement/
 * payee.ts, docs/protocols.md "Payees"), through the real routes of the whole system: the program
 * on the local ledger, a fresh Postgres, REST over loopback. The mint, programs, sysvars and
 * program-derived addresses are refused on sight (authorize, x402 verify/settle, MPP payments);
 * an address the chain shows is not a wallet (another mint, a token account) is refused at
 * settlement; a wallet without a token account gets one at the service's expense, within the
 * paying account's quota.
 */
import { randomUUID } from "node:crypto";
import { createAccount, createMint, getAssociatedTokenAddressSync, TOKEN_PROGRAM_ID } from "@solana/spl-token";
import { Keypair, PublicKey, SYSVAR_RENT_PUBKEY, SystemProgram } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PaymentRequirement } from "../../api/gateway/x402/index.js";
import { payloadBody } from "../../api/gateway/x402/payload.js";
import { signPaymentPayload } from "../../api/gateway/x402/sign.js";
import { keypairSigner } from "../../api/gateway/chain/signer.js";
import { fundedAgent, rest, startTestSystem, type TestSystem, tokenBalanceUnits } from "../sdk/server-support.js";

const ORIGIN = "https://shop.example";
const QUOTA = 3;

let test: TestSystem;
let buyerKey: string;
let sellerKey: string;
let otherMint: string;
let foreignTokenAccount: string;

beforeAll(async () => {
  test = await startTestSystem({ payeeAccountQuota: QUOTA });
  const { system } = test;
  buyerKey = (await system.createAccount("buyer")).apiKey;
  sellerKey = (await system.createAccount("seller")).apiKey;
  await fundedAgent(system, buyerKey, "buyer", 5);
  // On-curve addresses that are not wallets: another mint, and a token account made with a
  // keypair (not an associated one). Only the chain can tell them from wallets.
  const authority = system.ledger.authority;
  otherMint = (await createMint(test.connection, authority, authority.publicKey, null, 6, Keypair.generate())).toBase58();
  foreignTokenAccount = (
    await createAccount(test.connection, authority, system.ledger.mint, Keypair.generate().publicKey, Keypair.generate())
  ).toBase58();
}, 180_000);

afterAll(async () => {
  await test?.stop();
});

const requirement = (payTo: string, amount = "10000"): Record<string, string> => ({
  scheme: "exact",
  network: test.system.network,
  token: test.system.token,
  amount,
  payTo,
  resource: `${ORIGIN}/item`,
});

async function reservations(): Promise<number> {
  const { rows } = await test.db.pool.query(
    "SELECT count(*)::int AS n FROM spend_reservations WHERE agent_id = (SELECT agent_id FROM agents WHERE public_id = 'buyer')",
  );
  return rows[0].n;
}

async function settlementsTo(payee: string): Promise<number> {
  const { rows } = await test.db.pool.query("SELECT count(*)::int AS n FROM settlements WHERE payee = $1", [payee]);
  return rows[0].n;
}

const authorize = (payTo: string, amount?: string) =>
  rest(
    test.system,
    buyerKey,
    "POST",
    "/v1/agents/buyer/payments/authorize",
    { endpoint: `${ORIGIN}/item`, x402: requirement(payTo, amount) },
    randomUUID(),
  );

/** Authorizes and settles one x402 payment to `payTo` through the routes, as agent and seller would. */
async function payX402(payTo: string, amount = "10000") {
  const authorized = await authorize(payTo, amount);
  expect(authorized.status, authorized.text).toBe(200);
  return rest(
    test.system,
    sellerKey,
    "POST",
    "/v1/x402/settle",
    { payment: authorized.body.payment, requirement: requirement(payTo, amount) },
    randomUUID(),
  );
}

describe("payees refused on sight (no chain read, nothing reserved or signed)", () => {
  const cases = (): Array<[string, string, string]> => [
    ["the settlement mint", test.system.token, "payee_is_mint"],
    ["the Token program", TOKEN_PROGRAM_ID.toBase58(), "payee_is_program"],
    ["the System program", SystemProgram.programId.toBase58(), "payee_is_program"],
    ["the rent sysvar", SYSVAR_RENT_PUBKEY.toBase58(), "payee_is_program"],
    // An associated token address is a program-derived (off-curve) address.
    [
      "an off-curve address",
      getAssociatedTokenAddressSync(test.system.ledger.mint, Keypair.generate().publicKey).toBase58(),
      "payee_off_curve",
    ],
  ];

  it("authorize answers 422 PAYEE_REFUSED (errorClass PaymentError) and reserves nothing", async () => {
    for (const [name, payTo, reason] of cases()) {
      const before = await reservations();
      const answer = await authorize(payTo);
      expect(answer.status, name).toBe(422);
      expect(answer.body, name).toMatchObject({
        code: "PAYEE_REFUSED",
        errorClass: "PaymentError",
        reason,
        field: "x402.payTo",
        payee: payTo,
      });
      expect(await reservations(), name).toBe(before);
    }
  });

  it("x402 verify and settle refuse a signed payload to such a payee with payee_refused, claiming no nonce", async () => {
    const signer = keypairSigner(Keypair.generate());
    for (const [name, payTo] of cases()) {
      const terms = requirement(payTo);
      const parsed: PaymentRequirement = { ...(terms as unknown as PaymentRequirement), amountUnits: 10_000n, scheme: "exact" };
      const payment = payloadBody(await signPaymentPayload(signer, parsed));
      const verified = await rest(test.system, sellerKey, "POST", "/v1/x402/verify", { payment, requirement: terms });
      expect(verified.body, name).toMatchObject({ valid: false, reason: "payee_refused" });
      const settled = await rest(test.system, sellerKey, "POST", "/v1/x402/settle", { payment, requirement: terms }, randomUUID());
      expect(settled.body, name).toMatchObject({ success: false, reason: "payee_refused" });
      const { rows } = await test.db.pool.query("SELECT count(*)::int AS n FROM x402_nonces WHERE pay_to = $1", [payTo]);
      expect(rows[0].n, name).toBe(0);
      expect(await settlementsTo(payTo), name).toBe(0);
    }
  });

  it("MPP payments to such a payTo answer 422 PAYEE_REFUSED before the submission is read", async () => {
    for (const [name, payTo, reason] of cases()) {
      const answer = await rest(test.system, sellerKey, "POST", "/v1/mpp/payments", {
        request: {
          protocol: "mpp/1.0",
          amount: { value: "0.01", currency: "USDC" },
          paymentMethods: ["stablecoin"],
          sessionSupported: true,
          paymentEndpoint: `${ORIGIN}/mpp/pay`,
        },
        submission: { method: "stablecoin" },
        payTo,
        serviceOrigin: ORIGIN,
      });
      expect(answer.status, name).toBe(422);
      expect(answer.body, name).toMatchObject({ code: "PAYEE_REFUSED", errorClass: "PaymentError", reason, field: "payTo" });
    }
  });
});

describe("payees the chain shows are not wallets are refused at settlement, before signing", () => {
  it.each([
    ["another mint", () => otherMint],
    ["a token account", () => foreignTokenAccount],
  ])("%s: settlement fails with payee_not_wallet, nothing is sent, the reservation is freed", async (_name, payee) => {
    const payTo = payee();
    const balance = await tokenBalanceUnits(test, payTo);
    const settled = await payX402(payTo);
    expect(settled.body).toMatchObject({ success: false, reason: "settlement_failed" });
    expect(settled.body.detail).toContain("payee_not_wallet");
    expect(await settlementsTo(payTo)).toBe(0);
    expect(await tokenBalanceUnits(test, payTo)).toBe(balance);
    const { rows } = await test.db.pool.query(
      "SELECT status FROM spend_reservations WHERE agent_id = (SELECT agent_id FROM agents WHERE public_id = 'buyer') AND payment_ref IN (SELECT 'x402:' || payer || ':' || nonce FROM x402_nonces WHERE pay_to = $1)",
      [payTo],
    );
    expect(rows.map((row) => row.status)).toEqual(["released"]);
  });
});

describe("a wallet without a token account", () => {
  it(`gets one at the service's expense, at most ${QUOTA} per paying account in 24 hours (its own agents' accounts included); a payee with one is always paid`, async () => {
    // The buyer's own token account, opened when it was registered, took one slot of its account's quota.
    const opened = await test.db.pool.query(
      "SELECT count(*)::int AS n FROM agent_token_accounts WHERE account_id = (SELECT account_id FROM agents WHERE public_id = 'buyer')",
    );
    expect(opened.rows[0].n).toBe(1);
    const left = QUOTA - 1;
    const fresh = Array.from({ length: left + 1 }, () => Keypair.generate().publicKey.toBase58());
    for (const payTo of fresh.slice(0, left)) {
      const settled = await payX402(payTo);
      expect(settled.body, settled.text).toMatchObject({ success: true });
      expect(await tokenBalanceUnits(test, payTo)).toBe(10_000n);
    }
    const { rows } = await test.db.pool.query("SELECT count(*)::int AS n FROM settlements WHERE payee_account_created");
    expect(rows[0].n).toBe(left);

    const beyond = await payX402(fresh[left]!);
    expect(beyond.body).toMatchObject({ success: false, reason: "settlement_failed" });
    expect(beyond.body.detail).toContain("payee_account_quota");
    expect(await settlementsTo(fresh[left]!)).toBe(0);
    expect(
      await test.connection.getAccountInfo(getAssociatedTokenAddressSync(test.system.ledger.mint, new PublicKey(fresh[left]!))),
    ).toBeNull();

    // A payee whose token account exists costs nothing and is paid past the quota.
    const again = await payX402(fresh[0]!);
    expect(again.body, again.text).toMatchObject({ success: true });
    expect(await tokenBalanceUnits(test, fresh[0]!)).toBe(20_000n);
  });
});
