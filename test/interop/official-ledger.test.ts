/**
 * The official x402 and MPP packages, unmodified and configured only through their public
 * options, paying each other on our local ledger: proof that the ledger speaks the Solana RPC
 * they need (partially signed simulation with `sigVerify: false`, `jsonParsed` transactions,
 * signature statuses) with a real validator's answers.
 *
 * x402: `@x402/fetch` + `@x402/svm` client scheme → `@x402/express` resource server →
 * `@x402/core` facilitator with `@x402/svm`'s facilitator scheme (in process), on the devnet
 * network id pointed at the local RPC URL (x402 has no localnet id; nothing checks the genesis).
 * MPP: `mppx` client with `@solana/mpp`'s charge method → `mppx` server with `@solana/mpp`'s
 * charge method on its `localnet` network, pull mode with a fee-paying server and push mode.
 */
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { AnchorProvider } from "@coral-xyz/anchor";
import { Mppx as MppxClient, solana as solanaClient } from "@solana/mpp/client";
import { Mppx as MppxServer, solana as solanaServer } from "@solana/mpp/server";
import { createKeyPairSignerFromBytes, createSolanaRpc, type KeyPairSigner, type Signature } from "@solana/kit";
import { Keypair, LAMPORTS_PER_SOL, type PublicKey } from "@solana/web3.js";
import { x402Facilitator } from "@x402/core/facilitator";
import type { FacilitatorClient } from "@x402/core/server";
import type { SupportedResponse } from "@x402/core/types";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { SOLANA_DEVNET_CAIP2, toClientSvmSigner, toFacilitatorSvmSigner } from "@x402/svm";
import { ExactSvmScheme as ExactSvmClientScheme } from "@x402/svm/exact/client";
import { registerExactSvmScheme as registerFacilitatorScheme } from "@x402/svm/exact/facilitator";
import { ExactSvmScheme as ExactSvmServerScheme } from "@x402/svm/exact/server";
import express from "express";
import { Receipt } from "mppx";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AgentWallet,
  airdrop,
  createAgentWallet,
  type LedgerAccess,
  ledgerAccess,
  tokenBalanceUnits,
} from "../../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";

let localnet: Localnet;
let ledger: LedgerAccess;
let provider: AnchorProvider;
let rpc: ReturnType<typeof createSolanaRpc>;
const servers: Server[] = [];

beforeAll(async () => {
  localnet = await startLocalnet();
  ledger = ledgerAccess(localnet);
  provider = ledger.provider;
  rpc = createSolanaRpc(localnet.rpcUrl);
});

afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
  await localnet?.stop();
});

// ---- helpers ---------------------------------------------------------------------------------

function kitSigner(keypair: Keypair): Promise<KeyPairSigner> {
  return createKeyPairSignerFromBytes(keypair.secretKey);
}

/** A keypair holding only SOL: a fee payer that must not appear in any transfer. */
async function feePayer(): Promise<Keypair> {
  const keypair = Keypair.generate();
  await airdrop(provider, keypair.publicKey, LAMPORTS_PER_SOL);
  return keypair;
}

async function lamports(key: PublicKey): Promise<bigint> {
  return BigInt(await provider.connection.getBalance(key, "confirmed"));
}

async function listen(server: Server): Promise<string> {
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The confirmed transaction as `jsonParsed`, the way both SDKs read it back. */
async function parsedTransaction(signature: string) {
  const tx = await rpc
    .getTransaction(signature as Signature, { commitment: "confirmed", encoding: "jsonParsed", maxSupportedTransactionVersion: 0 })
    .send();
  if (tx === null) throw new Error(`getTransaction(${signature}) returned null`);
  return tx;
}

interface Balances {
  readonly payerTokens: bigint;
  readonly payeeTokens: bigint;
  readonly payerLamports: bigint;
  readonly feePayerLamports: bigint;
}

async function balances(payer: AgentWallet, payee: AgentWallet, sponsor: PublicKey): Promise<Balances> {
  return {
    payerTokens: await tokenBalanceUnits(provider, payer.tokenAccount),
    payeeTokens: await tokenBalanceUnits(provider, payee.tokenAccount),
    payerLamports: await lamports(payer.publicKey),
    feePayerLamports: await lamports(sponsor),
  };
}

// ---- x402 ------------------------------------------------------------------------------------

describe("x402 exact on Solana, official client, resource server and facilitator", () => {
  const network = SOLANA_DEVNET_CAIP2;
  const price = 12_345n;

  it("pays a protected route with a partially signed transfer the facilitator verifies, co-signs and settles", async () => {
    const payer = await createAgentWallet(ledger, { usdcUnits: 1_000_000n });
    const payee = await createAgentWallet(ledger, { airdropLamports: 0 });
    const facilitatorKey = await feePayer();
    const mint = ledger.info.mint.toBase58();

    const facilitator = new x402Facilitator();
    registerFacilitatorScheme(facilitator, {
      signer: toFacilitatorSvmSigner(await kitSigner(facilitatorKey), { defaultRpcUrl: localnet.rpcUrl }),
      networks: network,
    });
    // The facilitator in process, behind the client interface the resource server talks to.
    const facilitatorClient: FacilitatorClient = {
      verify: (payload, requirements) => facilitator.verify(payload, requirements),
      settle: (payload, requirements) => facilitator.settle(payload, requirements),
      // Its own return type widens `network` to string; the kinds are the CAIP-2 ids registered above.
      getSupported: async () => facilitator.getSupported() as SupportedResponse,
    };
    const resourceServer = new x402ResourceServer(facilitatorClient).register(network, new ExactSvmServerScheme());
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /quote": {
            accepts: { scheme: "exact", network, payTo: payee.publicKey.toBase58(), price: { amount: price.toString(), asset: mint } },
            description: "a quote",
          },
        },
        resourceServer,
      ),
    );
    app.get("/quote", (_req, res) => {
      res.json({ quote: 42 });
    });
    const base = await listen(createServer(app));

    const client = new x402Client().register(
      network,
      new ExactSvmClientScheme(toClientSvmSigner(await kitSigner(payer.keypair)), { rpcUrl: localnet.rpcUrl }),
    );
    client.setSpendControls({ allowedAssets: [{ network, asset: mint, maxAmountPerPayment: price.toString() }] });
    const pay = wrapFetchWithPayment(fetch, client);

    const before = await balances(payer, payee, facilitatorKey.publicKey);
    const response = await pay(`${base}/quote`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ quote: 42 });
    const settlement = decodePaymentResponseHeader(response.headers.get("PAYMENT-RESPONSE") ?? "");
    expect(settlement).toMatchObject({ success: true, network, payer: payer.publicKey.toBase58() });
    const after = await balances(payer, payee, facilitatorKey.publicKey);

    expect(before.payerTokens - after.payerTokens).toBe(price);
    expect(after.payeeTokens - before.payeeTokens).toBe(price);
    expect(after.payerLamports).toBe(before.payerLamports);
    const tx = await parsedTransaction(settlement.transaction);
    expect(tx.meta?.err).toBeNull();
    expect(before.feePayerLamports - after.feePayerLamports).toBe(tx.meta?.fee);
    const keys = tx.transaction.message.accountKeys;
    expect(keys[0]).toMatchObject({ pubkey: facilitatorKey.publicKey.toBase58(), signer: true, writable: true });
    expect(keys.find((k) => k.pubkey === payer.publicKey.toBase58())).toMatchObject({ signer: true, writable: false });
    const [limit, unitPrice, transfer, memo] = tx.transaction.message.instructions;
    expect(limit).toMatchObject({ programId: "ComputeBudget111111111111111111111111111111", accounts: [] });
    expect(unitPrice).toMatchObject({ programId: "ComputeBudget111111111111111111111111111111" });
    expect(transfer).toMatchObject({
      program: "spl-token",
      parsed: {
        type: "transferChecked",
        info: {
          source: payer.tokenAccount.toBase58(),
          destination: payee.tokenAccount.toBase58(),
          mint,
          authority: payer.publicKey.toBase58(),
          // @solana/kit reads every integer of a parsed instruction as a bigint.
          tokenAmount: { amount: price.toString(), decimals: 6n, uiAmountString: "0.012345" },
        },
      },
    });
    expect(memo).toMatchObject({ program: "spl-memo", parsed: expect.stringMatching(/^[0-9a-f]{32}$/) });
  });
});

// ---- MPP -------------------------------------------------------------------------------------

describe("MPP solana charge, official client and server", () => {
  const amount = 2_500n;

  async function chargeServer(payee: AgentWallet, sponsor: KeyPairSigner | undefined): Promise<string> {
    const mppx = MppxServer.create({
      methods: [
        solanaServer.charge({
          recipient: payee.publicKey.toBase58(),
          currency: ledger.info.mint.toBase58(),
          decimals: ledger.info.decimals,
          network: "localnet",
          rpcUrl: localnet.rpcUrl,
          ...(sponsor === undefined ? {} : { signer: sponsor }),
        }),
      ],
      secretKey: "local-ledger-interop-test-secret-key-0123456789",
      realm: "localhost",
    });
    const charge = MppxServer.toNodeListener(mppx.charge({ amount: amount.toString() }));
    return listen(
      createServer(async (req, res) => {
        const result = await charge(req, res);
        if (result.status === 402) return;
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ report: "paid" }));
      }),
    );
  }

  async function payWith(url: string, payer: AgentWallet, options: Partial<Parameters<typeof solanaClient.charge>[0]> = {}) {
    const client = MppxClient.create({
      methods: [solanaClient.charge({ signer: await kitSigner(payer.keypair), rpcUrl: localnet.rpcUrl, ...options })],
      polyfill: false,
    });
    const response = await client.fetch(url);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ report: "paid" });
    return Receipt.fromResponse(response);
  }

  it("pull mode: the server co-signs as fee payer, broadcasts and verifies the parsed transfer", async () => {
    const payer = await createAgentWallet(ledger, { usdcUnits: 100_000n });
    const payee = await createAgentWallet(ledger, { airdropLamports: 0 });
    const sponsorKey = await feePayer();
    const url = await chargeServer(payee, await kitSigner(sponsorKey));

    const before = await balances(payer, payee, sponsorKey.publicKey);
    const receipt = await payWith(url, payer);
    const after = await balances(payer, payee, sponsorKey.publicKey);

    expect(receipt).toMatchObject({ method: "solana", status: "success" });
    expect(before.payerTokens - after.payerTokens).toBe(amount);
    expect(after.payeeTokens - before.payeeTokens).toBe(amount);
    expect(after.payerLamports).toBe(before.payerLamports);
    const tx = await parsedTransaction(receipt.reference);
    expect(before.feePayerLamports - after.feePayerLamports).toBe(tx.meta?.fee);
    expect(tx.transaction.message.accountKeys[0]?.pubkey).toBe(sponsorKey.publicKey.toBase58());
  });

  it("push mode: the client broadcasts, the server finds the transfer by signature", async () => {
    const payer = await createAgentWallet(ledger, { usdcUnits: 100_000n });
    const payee = await createAgentWallet(ledger, { airdropLamports: 0 });
    const url = await chargeServer(payee, undefined);

    const before = await balances(payer, payee, payer.publicKey);
    const receipt = await payWith(url, payer, { broadcast: true });
    const after = await balances(payer, payee, payer.publicKey);

    expect(before.payerTokens - after.payerTokens).toBe(amount);
    expect(after.payeeTokens - before.payeeTokens).toBe(amount);
    const tx = await parsedTransaction(receipt.reference);
    expect(tx.transaction.message.accountKeys[0]?.pubkey).toBe(payer.publicKey.toBase58());
    expect(before.payerLamports - after.payerLamports).toBe(tx.meta?.fee);
  });
});
