/**
 * Bench (b): one x402 payment end to end on loopback, one at a time: the paid API answers 402 →
 * the agent authorizes through REST /v1 → retries with the `X-PAYMENT` headers → the paid API
 * settles through `POST /v1/x402/settle` (keyed), which puts the payment on the local ledger →
 * 200. The reservation's `complete` is timed on its own (the client sends it after the answer).
 *
 * The gateway's own share of a payment is `authorize + settle route − ledger`, where `ledger` is
 * the settlement's send + confirm (`completeSettlement`, timed by ledger-timer.ts).
 *
 * Every other payment goes to a second paid API that settles without an Idempotency-Key, which
 * shows what the key's dedicated Postgres connection costs the settle route.
 */
import { Keypair } from "@solana/web3.js";
import type { System } from "../../scripts/system.js";
import { startFacilitatedApi } from "../../test/gateway/support/facilitated-api.js";
import { type GatewayClient, payThroughGateway } from "../../test/gateway/support/gateway-payer.js";
import { type Stats, stats } from "./latency.js";
import { timeLedger } from "./ledger-timer.js";
import { fundedAgent } from "./setup.js";

const PRICE_UNITS = 10_000n;

export interface X402Run {
  readonly endToEnd: Stats;
  readonly authorize: Stats;
  readonly settleRoute: Stats;
  readonly settleRouteUnkeyed: Stats;
  readonly ledger: Stats;
  readonly settlePayment: Stats;
  readonly gatewayShare: Stats;
  readonly complete: Stats;
  readonly problems: readonly string[];
}

export async function runX402(
  system: System,
  client: GatewayClient,
  serverKey: string,
  payments: number,
  warmup: number,
): Promise<X402Run> {
  const agentId = "bench-x402";
  await fundedAgent(client, agentId, Math.ceil((Number(PRICE_UNITS) * 2 * (payments + warmup)) / 1_000_000) + 1);
  const terms = { scheme: "exact", network: system.network, token: system.token, payTo: Keypair.generate().publicKey.toBase58() } as const;
  const api = await startFacilitatedApi({ gatewayUrl: system.apiUrl, apiKey: serverKey, terms });
  const unkeyed = await startFacilitatedApi({ gatewayUrl: system.apiUrl, apiKey: serverKey, terms, idempotentSettle: false });
  const timer = timeLedger(system.settlement);
  const problems: string[] = [];
  const samples = {
    endToEnd: [] as number[],
    authorize: [] as number[],
    settleRoute: [] as number[],
    ledger: [] as number[],
    settlePayment: [] as number[],
    gatewayShare: [] as number[],
    complete: [] as number[],
  };
  const unkeyedSettle: number[] = [];
  try {
    for (let i = 0; i < warmup + payments; i += 1) {
      const plain = await payThroughGateway(client, agentId, `${unkeyed.origin}/x402/price/${PRICE_UNITS}/bench-${i}`);
      const plainSettle = plain.kind === "paid" ? unkeyed.settlements.find((s) => s.txHash === plain.txHash) : undefined;
      if (plainSettle === undefined) problems.push(`unkeyed x402 payment ${i} did not settle`);
      else if (i >= warmup) unkeyedSettle.push(plainSettle.settle_ms);

      const outcome = await payThroughGateway(client, agentId, `${api.origin}/x402/price/${PRICE_UNITS}/bench-${i}`);
      if (outcome.kind !== "paid") {
        problems.push(`x402 payment ${i}: ${outcome.kind} ${JSON.stringify(outcome.kind === "refused" ? outcome.problem : outcome.body)}`);
        continue;
      }
      if (outcome.completeStatus !== 200) problems.push(`x402 payment ${i}: complete answered ${outcome.completeStatus}`);
      const settle = api.settlements.find((s) => s.txHash === outcome.txHash);
      const ledger_ms = timer.sendConfirm.get(outcome.txHash);
      const settlePayment_ms = timer.settle.get(outcome.txHash);
      if (settle === undefined || ledger_ms === undefined || settlePayment_ms === undefined) {
        problems.push(`x402 payment ${i}: no settle or ledger timing for ${outcome.txHash}`);
        continue;
      }
      if (i < warmup) continue;
      const t = outcome.timings;
      samples.endToEnd.push(t.challenge_ms + t.authorize_ms + t.paid_ms);
      samples.authorize.push(t.authorize_ms);
      samples.settleRoute.push(settle.settle_ms);
      samples.ledger.push(ledger_ms);
      samples.settlePayment.push(settlePayment_ms);
      samples.gatewayShare.push(t.authorize_ms + settle.settle_ms - ledger_ms);
      samples.complete.push(t.complete_ms);
    }
  } finally {
    timer.restore();
    await Promise.all([api.close(), unkeyed.close()]);
  }
  return {
    endToEnd: stats(samples.endToEnd),
    authorize: stats(samples.authorize),
    settleRoute: stats(samples.settleRoute),
    settleRouteUnkeyed: stats(unkeyedSettle),
    ledger: stats(samples.ledger),
    settlePayment: stats(samples.settlePayment),
    gatewayShare: stats(samples.gatewayShare),
    complete: stats(samples.complete),
    problems,
  };
}
