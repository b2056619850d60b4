/**
 * Bench (c): a paid MPP request on a reused session (spec 3: "Token is reused; no
 * renegotiation"). The session is negotiated once (402 → signed submission to the payment
 * endpoint → confirmation with `X-MPP-Session`); then each measured request carries the token and
 * is paid through `MppService.useSession`: the first by the establishing payment, every later one
 * by a new charge on the session's rail (stablecoin: one transfer + record on the local ledger).
 * The paid API is the loopback fixture (test/gateway/support/paid-api.ts) over the running
 * system's Postgres, settlement and wallets.
 */
import { Keypair } from "@solana/web3.js";
import { internalAgentId } from "../../api/shared/agent-ids.js";
import { StandInCardProcessor } from "../../api/gateway/card/index.js";
import { MppService, X_MPP_SESSION } from "../../api/gateway/mpp/index.js";
import { keypairSigner } from "../../api/gateway/chain/index.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import type { System } from "../../scripts/system.js";
import { MppSessions } from "../../sdk/src/sessions.js";
import type { GatewayClient } from "../../test/gateway/support/gateway-payer.js";
import { startPaidApi } from "../../test/gateway/support/paid-api.js";
import { payMpp } from "../../test/gateway/support/paying-client.js";
import { type Stats, stats } from "./latency.js";
import { timeLedger } from "./ledger-timer.js";
import { fundedAgent } from "./setup.js";

const PRICE_UNITS = 10_000n;

export interface MppRun {
  readonly request: Stats;
  readonly ledger: Stats;
  readonly settlePayment: Stats;
  readonly gatewayShare: Stats;
  readonly negotiate_ms: number;
  readonly problems: readonly string[];
}

export async function runMppSession(
  system: System,
  client: GatewayClient,
  requests: number,
  warmup: number,
  accountId: string,
): Promise<MppRun> {
  const agentId = "bench-mpp";
  await fundedAgent(client, agentId, Math.ceil((Number(PRICE_UNITS) * (requests + warmup + 2)) / 1_000_000) + 1);
  const payee = Keypair.generate().publicKey.toBase58();
  const api = await startPaidApi((origin) => ({
    mpp: {
      service: new MppService({
        programId: PAYMENT_LEDGER_PROGRAM_ID,
        pool: system.pool,
        settler: system.settlement,
        agents: system.wallets,
        cardProcessor: new StandInCardProcessor(),
        serviceOrigin: origin,
        payee,
      }),
      amountUnits: PRICE_UNITS,
      paymentMethods: ["stablecoin"],
      sessionSupported: true,
    },
  }));
  const url = `${api.origin}/mpp/report`;
  const timer = timeLedger(system.settlement);
  const problems: string[] = [];
  const samples = { request: [] as number[], ledger: [] as number[], settlePayment: [] as number[], gatewayShare: [] as number[] };
  let negotiate_ms = Number.NaN;
  try {
    const sessions = new MppSessions();
    const started = performance.now();
    const negotiated = await payMpp(
      url,
      agentId,
      keypairSigner(await system.wallets.keypair(internalAgentId(accountId, agentId))),
      sessions,
    );
    negotiate_ms = performance.now() - started;
    if (!negotiated.negotiated) problems.push("the first MPP payment did not negotiate a session");
    timer.sendConfirm.clear();
    const negotiatedSession = sessions.get(agentId, api.origin);
    if (negotiatedSession === undefined) throw new Error("no session token after negotiation");
    let token: string = negotiatedSession.token;
    for (let i = 0; i < warmup + requests; i += 1) {
      const begun = performance.now();
      const response: Response = await fetch(url, { headers: { [X_MPP_SESSION]: token } });
      const body = (await response.json()) as { txHash?: string };
      const request_ms = performance.now() - begun;
      if (response.status !== 200 || typeof body.txHash !== "string") {
        problems.push(`MPP session request ${i}: ${response.status} ${JSON.stringify(body)}`);
        continue;
      }
      token = response.headers.get(X_MPP_SESSION) ?? token;
      // The payment of this request on the ledger; absent when it was the session's prepaid call.
      const ledger_ms = timer.sendConfirm.get(body.txHash);
      if (i < warmup || ledger_ms === undefined) continue;
      timer.sendConfirm.delete(body.txHash);
      samples.request.push(request_ms);
      samples.ledger.push(ledger_ms);
      samples.settlePayment.push(timer.settle.get(body.txHash) ?? Number.NaN);
      samples.gatewayShare.push(request_ms - ledger_ms);
    }
    if (samples.request.length < requests)
      problems.push(`${requests - samples.request.length} MPP session requests were not charged on the ledger`);
  } finally {
    timer.restore();
    await api.close();
  }
  return {
    request: stats(samples.request),
    ledger: stats(samples.ledger),
    settlePayment: stats(samples.settlePayment),
    gatewayShare: stats(samples.gatewayShare),
    negotiate_ms,
    problems,
  };
}
