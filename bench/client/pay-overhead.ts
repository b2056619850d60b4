/**
 * What `client.pay` costs over a direct fetch of the same resource, on the whole system
 * (`startSystem`) and a resource server on loopback; same server, handler and answer, interleaved
 * round by round:
 *   - direct:         `fetch` with the payment gate off (the baseline);
 *   - x402 pay:       402 → authorize → retry with X-PAYMENT → settled by the facilitator → 200;
 *   - MPP session:    one request on a reused session (X-MPP-Session), charged at the gateway;
 *   - official x402:  against `@x402/express` with the official facilitator in process: 402 →
 *                     authorize (the gateway signs) → PAYMENT-SIGNATURE → co-signed, settled → 200;
 *   - mppx:           against `mppx` with `@solana/mpp`'s charge (fee sponsored): 402 → authorize →
 *                     Authorization: Payment → the server co-signs and broadcasts → 200.
 * Overhead = pay − direct, at p50 and p99. Prints the table; exits 1 only for a wrong answer.
 *
 *   npm run bench:client [-- --rounds 200 --warmup 10]
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createKeyPairSignerFromBytes } from "@solana/kit";
import { Mppx as MppxServer, solana as solanaServer } from "@solana/mpp/server";
import { Keypair, LAMPORTS_PER_SOL } from "@solana/web3.js";
import { x402Facilitator } from "@x402/core/facilitator";
import type { FacilitatorClient } from "@x402/core/server";
import type { SupportedResponse } from "@x402/core/types";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { SOLANA_DEVNET_CAIP2, toFacilitatorSvmSigner } from "@x402/svm";
import { registerExactSvmScheme as registerFacilitatorScheme } from "@x402/svm/exact/facilitator";
import { ExactSvmScheme as ExactSvmServerScheme } from "@x402/svm/exact/server";
import express from "express";
import type { AddressInfo } from "node:net";
import { airdrop, createAgentWallet, ledgerAccess } from "../../scripts/agent-wallets.js";
import type { System } from "../../scripts/system.js";
import type { PaymentResult } from "../../sdk/src/client.js";
import { mppMiddleware, type NodeMiddleware, type NodeRequest, x402Middleware } from "../../sdk/src/server/index.js";
import { row, type Stats, stats, TABLE_HEADER } from "../gateway/latency.js";
import { interleaved, roundsFlags, runPayBench } from "./pay-bench.js";

const ROUNDS = roundsFlags({ rounds: 200, warmup: 10 });

const PRICE_UNITS = 1_000n; // 0.001 USDC per call: thousands of calls fit a small wallet.

function answer(res: ServerResponse): void {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ quote: 42, source: "bench" }));
}

/**
 * The official x402 and MPP servers on loopback, paying a wallet outside the gateway: an x402 one
 * (`@x402/express` + the official facilitator in process, the devnet id on the local RPC URL) and
 * an `mppx` one (`@solana/mpp` charge on `localnet`, fee sponsored). Each fee payer holds SOL.
 */
async function officialServers(system: System): Promise<{ x402: string; mpp: string; close(): void }> {
  const ledger = ledgerAccess(system.localnet);
  const payTo = (await createAgentWallet(ledger, { airdropLamports: 0 })).publicKey.toBase58();
  const funded = async (): Promise<Keypair> => {
    const keypair = Keypair.generate();
    await airdrop(ledger.provider, keypair.publicKey, 10 * LAMPORTS_PER_SOL);
    return keypair;
  };
  const rpcUrl = system.localnet.info.rpcUrl;
  const network = SOLANA_DEVNET_CAIP2;
  const facilitator = new x402Facilitator();
  registerFacilitatorScheme(facilitator, {
    signer: toFacilitatorSvmSigner(await createKeyPairSignerFromBytes((await funded()).secretKey), { defaultRpcUrl: rpcUrl }),
    networks: network,
  });
  const facilitatorClient: FacilitatorClient = {
    verify: (payload, requirements) => facilitator.verify(payload, requirements),
    settle: (payload, requirements) => facilitator.settle(payload, requirements),
    getSupported: async () => facilitator.getSupported() as SupportedResponse,
  };
  const resourceServer = new x402ResourceServer(facilitatorClient).register(network, new ExactSvmServerScheme());
  const app = express();
  const price = { amount: PRICE_UNITS.toString(), asset: system.token };
  app.use(paymentMiddleware({ "GET /quote": { accepts: { scheme: "exact", network, payTo, price } } }, resourceServer));
  app.get("/quote", (_req, res) => {
    res.json({ quote: 42, source: "bench" });
  });
  const mppx = MppxServer.create({
    methods: [
      solanaServer.charge({
        recipient: payTo,
        currency: system.token,
        decimals: system.localnet.info.decimals,
        network: "localnet",
        rpcUrl,
        signer: await createKeyPairSignerFromBytes((await funded()).secretKey),
      }),
    ],
    secretKey: "bench-client-mppx-secret-key-0123456789abcdef",
    realm: "127.0.0.1",
  });
  const charge = MppxServer.toNodeListener(mppx.charge({ amount: PRICE_UNITS.toString() }));
  const servers = [
    createServer(app),
    createServer(async (req, res) => {
      if ((await charge(req, res)).status === 402) return;
      answer(res);
    }),
  ];
  const origins: string[] = [];
  for (const server of servers) {
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    origins.push(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  }
  return {
    x402: `${origins[0]}/quote`,
    mpp: `${origins[1]}/quote`,
    close() {
      for (const server of servers) {
        server.closeAllConnections();
        server.close();
      }
    },
  };
}

void runPayBench("client pay overhead", 50, async ({ system, seller, payTo, client, wrong }) => {
  const gateway = { facilitatorUrl: system.apiUrl, apiKey: seller.apiKey };
  const gates: Record<string, NodeMiddleware> = {
    "/x402": x402Middleware({ ...gateway, amount: PRICE_UNITS, token: "usdc", network: system.network, payTo }),
    "/mpp": mppMiddleware({ ...gateway, amount: PRICE_UNITS, paymentMethods: ["stablecoin"], sessionSupported: true, payTo }),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const gate = Object.entries(gates).find(([prefix]) => req.url?.startsWith(prefix))?.[1];
    if (gate === undefined) return answer(res); // the direct route: no payment gate
    gate(req as NodeRequest, res, () => answer(res));
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const check = (result: PaymentResult, protocol: string): void => {
    if (result.status !== 200 || !result.paid || result.protocol !== protocol) wrong.push(`${protocol}: ${JSON.stringify(result.status)}`);
  };
  const direct = async (): Promise<void> => {
    const response = await fetch(`${origin}/quote`);
    await response.json();
    if (response.status !== 200) wrong.push(`direct: ${response.status}`);
  };
  const x402 = async (): Promise<void> => check(await client.pay({ endpoint: `${origin}/x402/quote` }), "x402");
  const mpp = async (): Promise<void> => check(await client.pay({ endpoint: `${origin}/mpp/quote` }), "mpp");
  const official = await officialServers(system);
  const officialX402 = async (): Promise<void> => check(await client.pay({ endpoint: official.x402 }), "x402");
  const mppx = async (): Promise<void> => check(await client.pay({ endpoint: official.mpp }), "mpp");

  await mpp(); // negotiates the session every later MPP call reuses
  const samples = await interleaved({ direct, x402, mpp, officialX402, mppx }, ROUNDS);
  server.closeAllConnections();
  server.close();
  official.close();

  const s = {
    direct: stats(samples.direct),
    x402: stats(samples.x402),
    mpp: stats(samples.mpp),
    officialX402: stats(samples.officialX402),
    mppx: stats(samples.mppx),
  };
  const over = (paid: Stats, base: Stats): string =>
    `p50 +${(paid.p50 - base.p50).toFixed(2)} ms, p99 +${(paid.p99 - base.p99).toFixed(2)} ms`;
  console.log(TABLE_HEADER);
  console.log(row("direct fetch of the resource (baseline)", s.direct));
  console.log(row("client.pay, x402 (402 → authorize → settle on ledger → 200)", s.x402));
  console.log(row("client.pay, MPP on a reused session", s.mpp));
  console.log(row("client.pay → official x402 middleware + facilitator", s.officialX402));
  console.log(row("client.pay → mppx server, @solana/mpp charge", s.mppx));
  console.log(`x402 pay overhead over direct fetch: ${over(s.x402, s.direct)}`);
  console.log(`MPP session pay overhead over direct fetch: ${over(s.mpp, s.direct)}`);
  console.log(`official x402 pay overhead over direct fetch: ${over(s.officialX402, s.direct)}`);
  console.log(`mppx pay overhead over direct fetch: ${over(s.mppx, s.direct)}`);
  console.log("spec targets: x402 settlement < 400 ms (4.5), MPP < 100 ms; see bench/client/README.md");
}).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
