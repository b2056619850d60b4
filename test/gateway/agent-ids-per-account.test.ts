/**
 * Agent ids are scoped per account (migration 018, api/shared/agent-ids.ts), on the whole
 * system (`startSystem`: the real program on the local ledger, a real Postgres, the indexer, the
 * webhook dispatcher, REST /v1 and GraphQL over real HTTP on loopback).
 *
 * Two accounts each register an agent `researcher`. Before, the second registration answered 409
 * AGENT_EXISTS: an oracle telling any caller which ids other accounts use. Now both succeed, and
 * every surface of each account names its own `researcher`: REST answers, the facilitator and MPP
 * answers, webhook and alert payloads, GraphQL, the live feed, metrics. New agents are stored
 * under an internal key `<account uuid>/researcher`, so an answer that leaks the key instead of the
 * public id carries the account's uuid: every answer and delivery here is checked for it.
 *
 * Each test sets up the two accounts it needs (`researchers()`), so none depends on another's order.
 */
import { randomUUID } from "node:crypto";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, Keypair, PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { registerAgent } from "../../api/shared/keys.js";
import { type System, startSystem } from "../../scripts/system.js";
import { createClient } from "../api/client.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";
import { WebhookReceiver } from "./support/webhook-receiver.js";
import { pollUntil } from "../support/poll.js";

const ORIGIN = "https://data.example";
/** How long the indexer and the dispatcher may take (a deadline for polling, not a wait). */
const DEADLINE_MS = 60_000;

interface Tenant {
  readonly name: "alpha" | "beta";
  readonly accountId: string;
  readonly apiKey: string;
  /** Receives the account's webhook endpoint deliveries (budget.warning, policy.violation). */
  readonly hooks: WebhookReceiver;
  /** Receives the account's alert notifications. */
  readonly alertHooks: WebhookReceiver;
  /** Its `researcher`'s wallet address, set at registration. */
  address: string;
}

let db: FreshDatabase;
let system: System;
let connection: Connection;
let gql: ReturnType<typeof createClient>;
let serial = 0;
/** Every account created, and every receiver of their deliveries. */
const accounts: string[] = [];
const receivers: WebhookReceiver[] = [];
/** Every answer body and feed event seen, to check no internal key ever leaves the gateway. */
const seen: string[] = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({
    databaseUrl: db.url,
    port: 0,
    allowPrivateNetworks: true,
    allowLoopbackWebhooks: true,
    logger: pino({ level: "silent" }),
  });
  connection = new Connection(system.localnet.info.rpcUrl, "confirmed");
  gql = createClient(system.apiUrl);
}, 120_000);

// Whatever a test was answered or delivered (and what arrived late from an earlier one) is checked.
afterEach(() => expectNoInternalKey());

afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await system?.stop();
  await db?.drop();
});

/** A REST call with the tenant's key and a fresh Idempotency-Key; its answer is kept in `seen`. */
async function call(tenant: Tenant, method: string, path: string, body?: unknown): Promise<RestAnswer> {
  const answer = await restCall(system.apiUrl, method, path, { key: tenant.apiKey, idem: randomUUID(), body });
  seen.push(answer.text);
  return answer;
}

async function graphql(tenant: Tenant, query: string, variables: Record<string, unknown> = {}) {
  const data = await gql.ok(tenant.apiKey, query, variables);
  seen.push(JSON.stringify(data));
  return data;
}

async function onChain(owner: string): Promise<bigint> {
  const account = getAssociatedTokenAddressSync(new PublicKey(system.token), new PublicKey(owner), true);
  if ((await connection.getAccountInfo(account, "confirmed")) === null) return 0n;
  return BigInt((await connection.getTokenAccountBalance(account, "confirmed")).value.amount);
}

/** Polls `read` until `done` holds; the value for which it held. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what = "the awaited state"): Promise<T> {
  const held = await pollUntil(
    async () => {
      const value = await read();
      return done(value) ? { value } : undefined;
    },
    { timeoutMs: DEADLINE_MS, intervalMs: 100, what },
  );
  return held.value;
}

const x402Requirement = (units: bigint, payTo: string, path: string) => ({
  scheme: "exact",
  network: system.network,
  token: system.token,
  amount: units.toString(),
  payTo,
  resource: `${ORIGIN}${path}`,
});

const mppRequest = (value: string) => ({
  protocol: "mpp/1.0",
  amount: { value, currency: "USDC" },
  paymentMethods: ["stablecoin"],
  sessionSupported: true,
  paymentEndpoint: `${ORIGIN}/mpp/pay`,
});

async function receiver(): Promise<WebhookReceiver> {
  const r = await WebhookReceiver.start();
  receivers.push(r);
  return r;
}

/** Two new accounts, alpha and beta, each with a webhook endpoint for budget.warning and policy.violation. */
async function tenants(): Promise<{ alpha: Tenant; beta: Tenant }> {
  const n = ++serial;
  const tenant = async (name: "alpha" | "beta"): Promise<Tenant> => {
    const { accountId, apiKey } = await system.createAccount(`${name} ${n}`);
    accounts.push(accountId);
    const t: Tenant = { name, accountId, apiKey, hooks: await receiver(), alertHooks: await receiver(), address: "" };
    const hook = await call(t, "POST", "/v1/webhooks", { url: t.hooks.url, eventTypes: ["budget.warning", "policy.violation"] });
    expect(hook.status, hook.text).toBe(201);
    return t;
  };
  return { alpha: await tenant("alpha"), beta: await tenant("beta") };
}

/** `tenants()`, each of which has registered its `researcher` ("Alpha's", "Beta's"). */
async function researchers(): Promise<{ alpha: Tenant; beta: Tenant }> {
  const pair = await tenants();
  for (const t of [pair.alpha, pair.beta]) {
    const created = await call(t, "POST", "/v1/agents", { agentId: "researcher", name: t.name === "alpha" ? "Alpha's" : "Beta's" });
    expect(created.status, created.text).toBe(201);
    t.address = created.body.address;
  }
  return pair;
}

async function fund(t: Tenant, agentId: string, usdc: number): Promise<void> {
  const funded = await call(t, "POST", `/v1/agents/${agentId}/wallet/fund`, { usdc });
  expect(funded.status, funded.text).toBe(200);
}

/** Alpha's `researcher` may pay at most 1 usdc a call; beta's has a daily budget of 1 usdc. */
async function limits(alpha: Tenant, beta: Tenant): Promise<void> {
  const setA = await call(alpha, "PUT", "/v1/policies/researcher", { perCallLimit: { usdc: 1 } });
  expect(setA.status, setA.text).toBe(200);
  const setB = await call(beta, "PUT", "/v1/policies/researcher", { dailyBudget: { usdc: 1 } });
  expect(setB.status, setB.text).toBe(200);
}

/**
 * An x402 payment of 0.25 usdc by `t`'s `researcher` to a new payee: authorized, settled through
 * the facilitator and completed. `beforeSettle` runs between the authorization and the settlement.
 */
async function payX402(
  t: Tenant,
  beforeSettle: (authorized: RestAnswer, requirement: ReturnType<typeof x402Requirement>) => Promise<void> = async () => undefined,
) {
  const payee = Keypair.generate().publicKey.toBase58();
  const requirement = x402Requirement(250_000n, payee, "/x402");
  const authorized = await call(t, "POST", "/v1/agents/researcher/payments/authorize", {
    endpoint: requirement.resource,
    x402: requirement,
  });
  expect(authorized.status, authorized.text).toBe(200);
  await beforeSettle(authorized, requirement);
  const settled = await call(t, "POST", "/v1/x402/settle", { payment: authorized.body.payment, requirement });
  expect(settled.status, settled.text).toBe(200);
  const txHash = settled.body.txHash as string;
  const completed = await call(t, "POST", `/v1/agents/researcher/payments/${authorized.body.reservationId}/complete`, { txHash });
  expect(completed.status, completed.text).toBe(200);
  return { payee, authorized, settled, txHash };
}

/** An MPP payment of 0.9 usdc by `t`'s `researcher` to `till`, an agent the account registers for it. */
async function payMpp(t: Tenant) {
  const till = (await call(t, "POST", "/v1/agents", { agentId: "till" })).body.address as string;
  const authorized = await call(t, "POST", "/v1/agents/researcher/payments/authorize", {
    endpoint: `${ORIGIN}/mpp`,
    mpp: mppRequest("0.9"),
  });
  expect(authorized.status, authorized.text).toBe(200);
  const submitted = await call(t, "POST", "/v1/mpp/payments", {
    request: mppRequest("0.9"),
    submission: authorized.body.submission,
    payTo: till,
    serviceOrigin: ORIGIN,
  });
  expect(submitted.status, submitted.text).toBe(200);
  return { till, authorized, submitted, txHash: submitted.body.txHash as string };
}

/** A policy_violation alert on `t`'s `researcher`, notifying its alert receiver. */
async function violationAlert(t: Tenant): Promise<RestAnswer> {
  const alert = await call(t, "POST", "/v1/alerts", {
    agentId: "researcher",
    type: "policy_violation",
    notify: `webhook:${t.alertHooks.url}`,
  });
  expect(alert.status, alert.text).toBe(201);
  return alert;
}

/** An x402 payment of 2 usdc by `t`'s `researcher`, which its policy refuses. */
async function refusedPayment(t: Tenant): Promise<RestAnswer> {
  const requirement = x402Requirement(2_000_000n, Keypair.generate().publicKey.toBase58(), "/too-dear");
  return call(t, "POST", "/v1/agents/researcher/payments/authorize", { endpoint: requirement.resource, x402: requirement });
}

function deliveries(): string[] {
  return receivers.flatMap((r) => r.received.map((x) => x.body));
}

/** No answer, delivery or feed event seen so far carries an account's uuid. */
function expectNoInternalKey(): void {
  for (const text of [...seen, ...deliveries()]) for (const accountId of accounts) expect(text).not.toContain(accountId);
}

describe("agent ids are scoped per account", () => {
  it("two accounts each register `researcher` (both 201, no existence oracle); each lists only its own", async () => {
    const { alpha, beta } = await tenants();
    const first = await call(alpha, "POST", "/v1/agents", { agentId: "researcher", name: "Alpha's" });
    expect(first.status, first.text).toBe(201);
    const second = await call(beta, "POST", "/v1/agents", { agentId: "researcher", name: "Beta's" });
    expect(second.status, second.text).toBe(201);
    expect(first.body.agentId).toBe("researcher");
    expect(second.body.agentId).toBe("researcher");
    expect(second.body.address).not.toBe(first.body.address);
    alpha.address = first.body.address;
    beta.address = second.body.address;

    // Within one account the id is still unique.
    const again = await call(alpha, "POST", "/v1/agents", { agentId: "researcher" });
    expect(again.status, again.text).toBe(409);
    expect(again.body.code).toBe("AGENT_EXISTS");

    for (const t of [alpha, beta]) {
      const list = await call(t, "GET", "/v1/agents");
      expect(list.status, list.text).toBe(200);
      expect(list.body.agents.map((a: { agentId: string; address: string }) => [a.agentId, a.address])).toEqual([
        ["researcher", t.address],
      ]);
      const one = await call(t, "GET", "/v1/agents/researcher");
      expect(one.body).toMatchObject({ agentId: "researcher", address: t.address, name: t.name === "alpha" ? "Alpha's" : "Beta's" });
    }
  });

  it("wallet fund, withdraw and balance act on the caller's own `researcher` and answer its public id", async () => {
    const { alpha, beta } = await researchers();
    const fundA = await call(alpha, "POST", "/v1/agents/researcher/wallet/fund", { usdc: 5 });
    expect(fundA.status, fundA.text).toBe(200);
    expect(fundA.body).toMatchObject({ kind: "fund", agentId: "researcher", amount: { usdc: 5 }, status: "confirmed" });
    const fundB = await call(beta, "POST", "/v1/agents/researcher/wallet/fund", { usdc: 3 });
    expect(fundB.status, fundB.text).toBe(200);
    expect(fundB.body.agentId).toBe("researcher");

    const to = Keypair.generate().publicKey.toBase58();
    const withdrawn = await call(beta, "POST", "/v1/agents/researcher/wallet/withdraw", { to, usdc: 1 });
    expect(withdrawn.status, withdrawn.text).toBe(200);
    expect(withdrawn.body).toMatchObject({ kind: "withdraw", agentId: "researcher", amount: { usdc: 1 } });

    // The money moved from and to the right wallets, on the ledger itself.
    expect(await onChain(alpha.address)).toBe(5_000_000n);
    expect(await onChain(beta.address)).toBe(2_000_000n);
    expect(await onChain(to)).toBe(1_000_000n);
    for (const [t, usdc] of [
      [alpha, 5],
      [beta, 2],
    ] as const) {
      const wallet = await call(t, "GET", "/v1/agents/researcher/wallet");
      expect(wallet.body).toMatchObject({ agentId: "researcher", address: t.address, balance: { usdc } });
      expect((await call(t, "GET", "/v1/agents/researcher/wallet/balance")).body).toEqual({ usdc });
    }
  });

  it("policies are per account: each `researcher` has its own, answered under the public id", async () => {
    const { alpha, beta } = await researchers();
    await limits(alpha, beta);
    const a = await call(alpha, "GET", "/v1/policies/researcher");
    const b = await call(beta, "GET", "/v1/policies/researcher");
    expect(a.body).toMatchObject({ agentId: "researcher", perCallLimit: { usdc: 1 }, dailyBudget: null });
    expect(b.body).toMatchObject({ agentId: "researcher", perCallLimit: null, dailyBudget: { usdc: 1 } });
  });

  it("an x402 payment: authorize, facilitator verify/settle and complete name `researcher`, and only alpha's wallet pays", async () => {
    const { alpha, beta } = await researchers();
    await fund(alpha, "researcher", 5);
    await fund(beta, "researcher", 2);
    const feed = await gql.subscribe(
      alpha.apiKey,
      `subscription { transactionRecorded(agentId: "researcher") { txHash agentId agent { walletAddress } } }`,
    );
    try {
      const { payee, authorized, settled, txHash } = await payX402(alpha, async (authorized, requirement) => {
        // The payer's own account is told its agent's public id; another account is told none.
        const verified = await call(alpha, "POST", "/v1/x402/verify", { payment: authorized.body.payment, requirement });
        expect(verified.body).toEqual({ valid: true, payer: alpha.address, agentId: "researcher" });
        const foreign = await call(beta, "POST", "/v1/x402/verify", { payment: authorized.body.payment, requirement });
        expect(foreign.body).toEqual({ valid: true, payer: alpha.address });
      });
      expect(authorized.body.agentId).toBe("researcher");
      expect(authorized.body.payment.payload.from).toBe(alpha.address);
      expect(settled.body).toMatchObject({ success: true, payer: alpha.address, agentId: "researcher" });

      expect(await onChain(alpha.address)).toBe(4_750_000n);
      expect(await onChain(beta.address)).toBe(2_000_000n);
      expect(await onChain(payee)).toBe(250_000n);

      const events = await until(
        async () => feed.events,
        (e) => e.length > 0,
      );
      expect(events[0]?.data?.transactionRecorded).toEqual({ txHash, agentId: "researcher", agent: { walletAddress: alpha.address } });
      seen.push(JSON.stringify(events));
    } finally {
      feed.close();
    }
  });

  it("an MPP payment of beta's `researcher` answers its public id and moves beta's money, and its budget.warning names it", async () => {
    const { alpha, beta } = await researchers();
    await limits(alpha, beta);
    await fund(alpha, "researcher", 4.75);
    await fund(beta, "researcher", 2);
    const { till, authorized, submitted } = await payMpp(beta);
    expect(authorized.body).toMatchObject({ agentId: "researcher", protocol: "mpp", budgetState: "warning" });
    expect(submitted.body).toMatchObject({ success: true, payer: beta.address, agentId: "researcher" });
    expect(await onChain(beta.address)).toBe(1_100_000n);
    expect(await onChain(alpha.address)).toBe(4_750_000n);
    expect(await onChain(till)).toBe(900_000n);

    // 0.9 of a 1 usdc budget crossed 80 %: beta's endpoint hears of beta's `researcher`.
    await beta.hooks.until((received) => received.some((r) => r.body.includes('"budget.warning"')), DEADLINE_MS);
    const warning = JSON.parse(beta.hooks.received.find((r) => r.body.includes('"budget.warning"'))!.body);
    expect(warning).toMatchObject({ event: "budget.warning", agentId: "researcher", thresholdPercent: 80 });
  });

  it("a policy rejection names `researcher` in the problem, the webhook, the alert payload and the listing, for its own account only", async () => {
    const { alpha, beta } = await researchers();
    await limits(alpha, beta);
    const alert = await violationAlert(alpha);
    expect(alert.body.agentId).toBe("researcher");
    expect(
      (await call(alpha, "GET", "/v1/alerts?agentId=researcher")).body.alerts.map((a: { id: string; agentId: string }) => [
        a.id,
        a.agentId,
      ]),
    ).toEqual([[alert.body.id, "researcher"]]);
    // Beta's `researcher` is another agent: alpha's alert is not among its alerts.
    expect((await call(beta, "GET", "/v1/alerts?agentId=researcher")).body.alerts).toEqual([]);

    const refused = await refusedPayment(alpha);
    expect(refused.status, refused.text).toBe(403);
    expect(refused.body).toMatchObject({ code: "POLICY_VIOLATION", reasonCode: "per_call_limit_exceeded" });

    await alpha.hooks.until((received) => received.some((r) => r.body.includes('"policy.violation"')), DEADLINE_MS);
    const violation = JSON.parse(alpha.hooks.received.find((r) => r.body.includes('"policy.violation"'))!.body);
    expect(violation).toMatchObject({ event: "policy.violation", agentId: "researcher", reason: "per_call_limit_exceeded" });
    await alpha.alertHooks.until((received) => received.length > 0, DEADLINE_MS);
    expect(JSON.parse(alpha.alertHooks.received[0]!.body)).toMatchObject({ event: "policy.violation", agentId: "researcher" });
    // Beta's endpoint never hears of alpha's rejection.
    expect(beta.hooks.received.some((r) => r.body.includes('"policy.violation"'))).toBe(false);

    const rejected = await call(alpha, "GET", "/v1/transactions?agentId=researcher&status=rejected");
    expect(rejected.body.transactions.map((t: { agentId: string; rejectionCode: string }) => [t.agentId, t.rejectionCode])).toEqual([
      ["researcher", "per_call_limit_exceeded"],
    ]);
    expect((await call(beta, "GET", "/v1/transactions?agentId=researcher&status=rejected")).body.transactions).toEqual([]);
  });

  it("GraphQL and metrics show each account its own `researcher`: agents, wallet, transactions, policy, spendSummary, paymentTree", async () => {
    const { alpha, beta } = await researchers();
    await limits(alpha, beta);
    await fund(alpha, "researcher", 5);
    await fund(beta, "researcher", 2);
    const paid = { alpha: [(await payX402(alpha)).txHash], beta: [(await payMpp(beta)).txHash] };
    for (const t of [alpha, beta]) {
      const own = paid[t.name];
      const other = paid[t.name === "alpha" ? "beta" : "alpha"];
      const data = await until(
        () =>
          graphql(
            t,
            `query {
              agents { agentId walletAddress }
              wallet(agentId: "researcher") { agentId address }
              transactions(agentId: "researcher", status: confirmed) { nodes { txHash agentId agent { agentId walletAddress } } }
              policy(agentId: "researcher") { agentId perCallLimit dailyBudget }
              spendSummary(agentId: "researcher") { agentId totalUnits byAgent { agentId amountUnits } }
              checkPolicy(agentId: "researcher", endpoint: "${ORIGIN}/x", amount: "0.01") { agentId allowed }
            }`,
          ),
        (d) => d.transactions.nodes.length === own.length && d.spendSummary.totalUnits !== "0",
      );
      const units = t.name === "alpha" ? "250000" : "900000";
      expect(data.agents).toEqual([
        { agentId: "researcher", walletAddress: t.address },
        ...(t.name === "beta" ? [{ agentId: "till", walletAddress: expect.any(String) }] : []),
      ]);
      expect(data.wallet).toEqual({ agentId: "researcher", address: t.address });
      expect(data.transactions.nodes).toEqual(
        own.map((txHash) => ({ txHash, agentId: "researcher", agent: { agentId: "researcher", walletAddress: t.address } })),
      );
      expect(data.policy).toEqual(
        t.name === "alpha"
          ? { agentId: "researcher", perCallLimit: "1.000000", dailyBudget: null }
          : { agentId: "researcher", perCallLimit: null, dailyBudget: "1.000000" },
      );
      expect(data.spendSummary).toEqual({
        agentId: "researcher",
        totalUnits: units,
        byAgent: [{ agentId: "researcher", amountUnits: units }],
      });
      expect(data.checkPolicy.agentId).toBe("researcher");

      const tree = await graphql(
        t,
        `query ($h: String!) { paymentTree(rootTxHash: $h) { nodes { txHash agentId } totals { agentCount } } }`,
        { h: own[0] },
      );
      expect(tree.paymentTree.nodes).toEqual([{ txHash: own[0], agentId: "researcher" }]);
      // The other account's payment is not in this account's tree, whatever the agents are named.
      expect(
        (await graphql(t, `query ($h: String!) { paymentTree(rootTxHash: $h) { totals { agentCount } } }`, { h: other[0] })).paymentTree,
      ).toBeNull();

      const metrics = await call(t, "GET", "/v1/agents/researcher/metrics?window=24h&metrics=spend");
      expect(metrics.status, metrics.text).toBe(200);
      expect(metrics.body.agentId).toBe("researcher");
      const spent = metrics.body.metrics.spend.reduce((sum: bigint, point: { valueUnits: string }) => sum + BigInt(point.valueUnits), 0n);
      expect(spent).toBe(BigInt(units));
    }
  });

  it("an agents.invoke invocation names invoker and sub-agent by public id, over REST and GraphQL", async () => {
    const { alpha, beta } = await researchers();
    await fund(alpha, "researcher", 5);
    const helper = (await call(alpha, "POST", "/v1/agents", { agentId: "helper" })).body.address as string;
    const requirement = x402Requirement(100_000n, helper, "/task");
    const authorized = await call(alpha, "POST", "/v1/agents/researcher/payments/authorize", {
      endpoint: requirement.resource,
      x402: requirement,
      invocationBudget: { usdc: 0.5 },
    });
    expect(authorized.status, authorized.text).toBe(200);
    const settled = await call(alpha, "POST", "/v1/x402/settle", { payment: authorized.body.payment, requirement });
    expect(settled.body, settled.text).toMatchObject({ success: true, agentId: "researcher" });
    const parentTxHash = settled.body.txHash as string;

    for (const agentId of ["researcher", "helper"]) {
      const seenBy = await call(alpha, "GET", `/v1/agents/${agentId}/invocations/${parentTxHash}`);
      expect(seenBy.status, seenBy.text).toBe(200);
      expect(seenBy.body).toMatchObject({
        parentTxHash,
        invoker: "researcher",
        invokerAddress: alpha.address,
        subAgentId: "helper",
        subAgentAddress: helper,
      });
    }
    // Beta's `researcher` did not invoke anything: the same path in beta's account finds nothing.
    expect((await call(beta, "GET", `/v1/agents/researcher/invocations/${parentTxHash}`)).status).toBe(404);

    const data = await until(
      () =>
        graphql(alpha, `query ($h: String!) { invocation(txHash: $h) { subAgents { invokerAgentId subAgentId } } }`, { h: parentTxHash }),
      (d) => d.invocation !== null,
    );
    expect(data.invocation.subAgents).toEqual([{ invokerAgentId: "researcher", subAgentId: "helper" }]);
  });

  it("problems that name an agent name its public id: AGENT_NOT_EMPTY, INSUFFICIENT_FUNDS, AGENT_ARCHIVED", async () => {
    const { alpha, beta } = await researchers();
    await fund(beta, "researcher", 2);
    expect((await call(beta, "POST", "/v1/agents", { agentId: "till" })).status).toBe(201);
    await fund(beta, "till", 0.9);
    const notEmpty = await call(beta, "DELETE", "/v1/agents/researcher");
    expect(notEmpty.status, notEmpty.text).toBe(409);
    expect(notEmpty.body).toMatchObject({ code: "AGENT_NOT_EMPTY", agentId: "researcher" });
    expect(notEmpty.body.detail).toMatch(/^agent researcher still has/);

    const poor = await call(beta, "POST", "/v1/agents/researcher/wallet/withdraw", {
      to: Keypair.generate().publicKey.toBase58(),
      usdc: 100,
    });
    expect(poor.status, poor.text).toBe(422);
    expect(poor.body).toMatchObject({ code: "INSUFFICIENT_FUNDS" });
    expect(poor.body.detail).toMatch(/^insufficient funds: agent researcher requested/);

    // Beta's `till` holds money: a forced archive keeps it withdrawable, and the agent
    // then refuses to authorize, naming `till`.
    expect((await call(beta, "DELETE", "/v1/agents/till?force=true")).status).toBe(200);
    const requirement = x402Requirement(1_000n, alpha.address, "/archived");
    const archived = await call(beta, "POST", "/v1/agents/till/payments/authorize", { endpoint: requirement.resource, x402: requirement });
    expect(archived.status, archived.text).toBe(409);
    expect(archived.body).toMatchObject({ code: "AGENT_ARCHIVED", agentId: "till" });
    expect(archived.body.detail).toMatch(/^agent till is archived/);
  });

  it("an archived id cannot be registered again in its account, while another account may register it", async () => {
    const { alpha, beta } = await tenants();
    expect((await call(alpha, "POST", "/v1/agents", { agentId: "scout" })).status).toBe(201);
    const archived = await call(alpha, "DELETE", "/v1/agents/scout");
    expect(archived.status, archived.text).toBe(200);
    expect(archived.body).toMatchObject({ agentId: "scout", archivedAt: expect.any(String) });
    const again = await call(alpha, "POST", "/v1/agents", { agentId: "scout" });
    expect(again.status, again.text).toBe(409);
    expect(again.body.code).toBe("AGENT_EXISTS");
    const elsewhere = await call(beta, "POST", "/v1/agents", { agentId: "scout" });
    expect(elsewhere.status, elsewhere.text).toBe(201);
    expect(elsewhere.body.agentId).toBe("scout");
  });

  it("an agent registered before migration 018 (key = public id) keeps its id in its account only", async () => {
    const { alpha, beta } = await tenants();
    // The pre-019 form, as api/shared/keys.ts registerAgent wrote it: the key is the bare id.
    await registerAgent(system.pool, alpha.accountId, { agentId: "veteran", walletAddress: Keypair.generate().publicKey.toBase58() });
    expect((await call(alpha, "GET", "/v1/agents/veteran")).body.agentId).toBe("veteran");
    const again = await call(alpha, "POST", "/v1/agents", { agentId: "veteran" });
    expect(again.status, again.text).toBe(409);
    expect(again.body.code).toBe("AGENT_EXISTS");
    const elsewhere = await call(beta, "POST", "/v1/agents", { agentId: "veteran" });
    expect(elsewhere.status, elsewhere.text).toBe(201);
    expect((await call(beta, "GET", "/v1/agents/veteran")).body.address).toBe(elsewhere.body.address);
    expect((await call(alpha, "GET", "/v1/agents/veteran")).body.address).not.toBe(elsewhere.body.address);
  });

  it("no answer, delivery or feed event ever carried an internal key (an account uuid)", async () => {
    // Every test's answers and deliveries are checked after it; this one makes deliveries of its
    // own (alpha's rejection to its endpoint and its alert, beta's to its endpoint), so the check
    // never passes on nothing, whichever tests ran before.
    const { alpha, beta } = await researchers();
    await limits(alpha, beta);
    await violationAlert(alpha);
    expect((await refusedPayment(alpha)).status).toBe(403);
    expect((await refusedPayment(beta)).status).toBe(403);
    const own = [alpha.hooks, alpha.alertHooks, beta.hooks];
    await Promise.all(own.map((r) => r.until((received) => received.length > 0, DEADLINE_MS)));
    expect(deliveries().length).toBeGreaterThanOrEqual(3);
    expectNoInternalKey();
  });
});
