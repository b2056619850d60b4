/**
 * The cli against the whole real system (scripts/system.ts: local ledger, Postgres, indexer, API):
 * agents are registered and funded over REST, pay each other with real x402 payments (authorize,
 * then the facilitator settles on the ledger), a sub-agent pays under an invocation opened by its
 * orchestrator's payment, and the commands' output is checked against what was paid. Commands
 * run in-process through `runCli`; one runs as a real child process through the bin's entry.
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSystem, type System } from "../../scripts/system.js";
import { runCli } from "../../sdk/src/cli/main.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";
import { agentKey } from "../support/agent-keys.js";
import { pollUntil } from "../support/poll.js";

const INDEX_DEADLINE_MS = 60_000;
const SUB_ENDPOINT = "https://sub.agents.test/run";
const PRICES = "https://api.data.test/v1/prices";
const NEWS = "https://api.data.test/v1/news";

let db: FreshDatabase;
let system: System;
let apiKey: string;
let rootTx: string;
const subTxs: string[] = [];

/** A REST call with the account's key; a POST gets a fresh Idempotency-Key. */
function rest(method: string, path: string, body?: unknown): Promise<RestAnswer> {
  return restCall(system.apiUrl, method, path, { key: apiKey, body, idem: method === "POST" ? randomUUID() : undefined });
}

async function ok(method: string, path: string, body?: unknown): Promise<any> {
  const answer = await rest(method, path, body);
  if (answer.status >= 300) throw new Error(`${method} ${path} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  return answer.body;
}

/** A real x402 payment: the gateway authorizes and signs, the facilitator settles on the ledger. */
async function payX402(agentId: string, endpoint: string, payTo: string, amountUnits: string): Promise<string> {
  const requirement = { scheme: "exact", network: system.network, token: system.token, amount: amountUnits, payTo, resource: endpoint };
  const authorized = await ok("POST", `/v1/agents/${agentId}/payments/authorize`, { endpoint, x402: requirement });
  const settled = await ok("POST", "/v1/x402/settle", { payment: authorized.payment, requirement });
  expect(settled).toMatchObject({ success: true, agentId });
  return settled.txHash as string;
}

async function waitIndexed(txHash: string): Promise<void> {
  let last = 0;
  await pollUntil(
    async () => {
      last = (await rest("GET", `/v1/transactions/${txHash}`)).status;
      return last === 200;
    },
    { timeoutMs: INDEX_DEADLINE_MS, intervalMs: 200, what: () => `transaction ${txHash} to be indexed (last ${last})` },
  );
}

interface Run {
  status: number;
  stdout: string;
  stderr: string;
}

async function cli(argv: string[], env: Record<string, string> = {}): Promise<Run> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const status = await runCli(argv, {
    env: { APG_API_KEY: apiKey, APG_BASE_URL: system.apiUrl, ...env },
    stdout: { write: (chunk: string) => stdout.push(chunk) },
    stderr: { write: (chunk: string) => stderr.push(chunk) },
    maxRetries: 0,
  });
  return { status, stdout: stdout.join(""), stderr: stderr.join("") };
}

async function cliOk(argv: string[]): Promise<string> {
  const run = await cli(argv);
  if (run.status !== 0) throw new Error(`cli ${argv.join(" ")} exited ${run.status}: ${run.stderr}`);
  return run.stdout;
}

beforeAll(async () => {
  db = await createFreshDatabase();
  system = await startSystem({
    databaseUrl: db.url,
    port: 0,
    allowPrivateNetworks: true,
    pollIntervalMs: 100,
    logger: pino({ level: "silent" }),
  });
  ({ apiKey } = await system.createAccount("cli test"));
  for (const agentId of ["orch", "sub", "svc"]) await ok("POST", "/v1/agents", { agentId });
  for (const agentId of ["orch", "sub"]) {
    const funded = await ok("POST", `/v1/agents/${agentId}/wallet/fund`, { usdc: 10 });
    expect(funded.status).toBe("confirmed");
  }
  const subAddress = (await ok("GET", "/v1/agents/sub/wallet")).address as string;
  const svcAddress = (await ok("GET", "/v1/agents/svc/wallet")).address as string;

  // The orchestrator pays the sub-agent (the root), which then pays a service twice under the
  // invocation that payment opened (depth 1 of the tree).
  rootTx = await payX402("orch", SUB_ENDPOINT, subAddress, "1500000");
  // Internal calls take the agents' internal keys (api/shared/agent-ids.ts).
  const [orchKey, subKey] = [await agentKey(system.pool, "orch"), await agentKey(system.pool, "sub")];
  const opened = await system.settlement.openInvocation({
    invokerAgentId: orchKey,
    parentTxHash: rootTx,
    subAgentId: subKey,
    budgetUnits: 1_000_000n,
  });
  for (const [endpoint, amountUnits] of [
    [PRICES, 250_000n],
    [NEWS, 100_000n],
  ] as const) {
    const paid = await system.settlement.settlePayment({
      agentId: subKey,
      payee: new PublicKey(svcAddress).toBase58(),
      amountUnits,
      protocol: "x402",
      rail: "stablecoin",
      endpoint,
      invocation: opened.invocation,
    });
    subTxs.push(paid.txHash);
  }
  for (const txHash of [rootTx, ...subTxs]) await waitIndexed(txHash);
}, 240_000);

afterAll(async () => {
  await system?.stop();
  await db?.drop();
});

describe("cli policies", () => {
  it("set stores every field (rate limit as words), get shows usedToday; none removes a limit", async () => {
    const set = await cliOk([
      "policies",
      "set",
      "orch",
      "--daily-budget",
      "50",
      "--per-call-limit",
      "5",
      "--allowed-domains",
      "sub.agents.test,data.test",
      "--blocked-domains",
      "evil.test",
      "--rate-limit",
      "100 per hour",
    ]);
    expect(set).toContain("Policy of orch updated.");
    const stored = await ok("GET", "/v1/policies/orch");
    expect(stored).toMatchObject({
      dailyBudget: { usdc: 50 },
      perCallLimit: { usdc: 5 },
      allowedDomains: ["sub.agents.test", "data.test"],
      blockedDomains: ["evil.test"],
      rateLimit: { calls: 100, window: "1h" },
    });

    const get = await cliOk(["policies", "get", "orch"]);
    // The 1.5 usdc root payment counts against the budget: 1.5 / 50 = 3 %.
    expect(get).toMatch(/Daily budget:\s+50 USDC \(used today 1\.5 USDC, 3\.00%, open\)/);
    expect(get).toMatch(/Per-call limit:\s+5 USDC/);
    expect(get).toMatch(/Allowed domains:\s+sub\.agents\.test, data\.test/);
    expect(get).toMatch(/Rate limit:\s+100 per 1h \(\d+ of 100 calls used in the current 1h\)/);

    const json = JSON.parse(await cliOk(["policies", "get", "orch", "--json"]));
    expect(json.usedToday).toEqual({ usdc: 1.5 });

    await cliOk(["policies", "set", "orch", "--per-call-limit", "none", "--rate-limit", "10 per 5m"]);
    const after = await ok("GET", "/v1/policies/orch");
    expect(after.perCallLimit).toBeNull();
    expect(after.rateLimit).toEqual({ calls: 10, window: "5m" });
    // Omitted fields kept their values.
    expect(after.dailyBudget).toEqual({ usdc: 50 });

    // history: both changes as versions, newest first, each with its author, hash and limits.
    const history = (await cliOk(["policies", "history", "orch"])).trimEnd().split("\n");
    expect(history[0]).toMatch(/^VERSION\s+CREATED\s+BY\s+HASH\s+POLICY$/);
    expect(history[1]).toMatch(/^\s*\d+\s+\S+Z\s+key:\d+\s+[0-9a-f]{12}\s+daily 50 USDC, 10\/5m$/);
    expect(history[2]).toMatch(/^\s*\d+\s+\S+Z\s+key:\d+\s+[0-9a-f]{12}\s+daily 50 USDC, per call 5 USDC, 100\/1h$/);
    const versions = JSON.parse(await cliOk(["policies", "history", "orch", "--json"])).versions;
    expect(versions[0].version).toBe(versions[1].version + 1);
    expect((await cli(["policies", "history", "orch", "--limit", "0"])).status).toBe(2);
  });

  it("a policy the gateway refuses is exit 1 with the class; a malformed one exit 2 with nothing sent", async () => {
    const before = await ok("GET", "/v1/policies/sub");
    const usage = await cli(["policies", "set", "sub", "--daily-budget", "1.0000001"]);
    expect(usage.status).toBe(2);
    expect(usage.stderr).toContain("--daily-budget");
    expect(await ok("GET", "/v1/policies/sub")).toEqual(before);
    const unknown = await cli(["policies", "get", "nobody"]);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toMatch(/^ServiceError: .*nobody.* \[NOT_FOUND\]/);
  });
});

describe("cli transactions", () => {
  it("list shows hash, protocol, exact amount, endpoint without scheme and time", async () => {
    const out = (await cliOk(["transactions", "list", "--agent", "sub"])).trimEnd().split("\n");
    expect(out[0]).toMatch(/^TX HASH\s+PROTOCOL\s+AMOUNT\s+ENDPOINT\s+TIME$/);
    expect(out).toHaveLength(3);
    const prices = out.find((line) => line.startsWith(subTxs[0]!));
    expect(prices).toMatch(/\s+x402\s+0\.25 USDC\s+api\.data\.test\/v1\/prices\s+\d{4}-\d{2}-\d{2}T[\d:.]+Z$/);
    expect(out.find((line) => line.startsWith(subTxs[1]!))).toMatch(/0\.1 USDC\s+api\.data\.test\/v1\/news/);

    const json = JSON.parse(await cliOk(["transactions", "list", "--agent", "sub", "--json"]));
    expect(json.transactions.map((tx: { txHash: string }) => tx.txHash).sort()).toEqual([...subTxs].sort());
    expect(await cliOk(["transactions", "list", "--agent", "sub", "--protocol", "mpp"])).toBe("No transactions.\n");
    const first = (await cliOk(["transactions", "list", "--agent", "sub", "--limit", "1", "--since", "1h", "--domain", "data.test"]))
      .trimEnd()
      .split("\n");
    expect(first).toHaveLength(3);
    const more = /^More: add --after (\S+)$/.exec(first[2]!);
    expect(more).not.toBeNull();
    const second = (await cliOk(["transactions", "list", "--agent", "sub", "--limit", "1", "--after", more![1]!])).trimEnd().split("\n");
    expect(second).toHaveLength(2);
    // The two pages together are the sub-agent's two payments, each once.
    expect([first[1]!, second[1]!].map((line) => line.split(/\s+/)[0]).sort()).toEqual([...subTxs].sort());
  });

  it("a rejected payment is listed with status rejected", async () => {
    await cliOk(["policies", "set", "svc", "--per-call-limit", "0.5"]);
    const orchAddress = (await ok("GET", "/v1/agents/orch/wallet")).address as string;
    const requirement = {
      scheme: "exact",
      network: system.network,
      token: system.token,
      amount: "600000",
      payTo: orchAddress,
      resource: PRICES,
    };
    const rejected = await rest("POST", "/v1/agents/svc/payments/authorize", { endpoint: PRICES, x402: requirement });
    expect(rejected.status).toBe(403);
    const out = (await cliOk(["transactions", "list", "--agent", "svc"])).trimEnd().split("\n");
    expect(out[0]).toMatch(/TIME\s+STATUS$/);
    expect(out[1]).toMatch(/0\.6 USDC\s+api\.data\.test\/v1\/prices\s+\S+\s+rejected \(per_call_limit_exceeded\)$/);
  });

  it("inspect shows the transaction with its explorer link", async () => {
    const tx = await ok("GET", `/v1/transactions/${rootTx}`);
    const out = await cliOk(["transactions", "inspect", rootTx]);
    expect(out).toMatch(new RegExp(`Transaction:\\s+${rootTx}`));
    expect(out).toMatch(/Agent:\s+orch/);
    expect(out).toMatch(/Amount:\s+1\.5 USDC/);
    expect(out).toMatch(/Endpoint:\s+sub\.agents\.test\/run/);
    expect(out).toMatch(/Parent:\s+none \(top-level\)/);
    expect(out).toContain(`Explorer:`);
    expect(out).toContain(tx.solanaExplorer);
    expect(JSON.parse(await cliOk(["transactions", "inspect", subTxs[0]!, "--json"]))).toMatchObject({
      txHash: subTxs[0],
      parentTxHash: rootTx,
    });
  });

  it("tree nests the sub-agent's payments under the root and ends with the exact total", async () => {
    const out = (await cliOk(["transactions", "tree", rootTx])).trimEnd().split("\n");
    expect(out[0]).toMatch(/^TRANSACTION\s+AGENT\s+PROTOCOL\s+AMOUNT\s+ENDPOINT\s+TIME$/);
    expect(out[1]).toMatch(new RegExp(`^${rootTx}\\s+orch\\s+x402\\s+1\\.5 USDC\\s+sub\\.agents\\.test/run`));
    const children = out.slice(2, 4);
    expect(children.map((line) => line.slice(0, 3))).toEqual(["├─ ", "└─ "]);
    for (const txHash of subTxs) expect(children.some((line) => line.includes(txHash) && /\ssub\s/.test(line))).toBe(true);
    // 1.5 + 0.25 + 0.1, summed in base units.
    expect(out.at(-1)).toBe("Total: 1.85 USDC in 3 transactions by 2 agents");
    const json = JSON.parse(await cliOk(["transactions", "tree", rootTx, "--json"]));
    expect(json.transactions).toHaveLength(3);
    const shallow = (await cliOk(["transactions", "tree", rootTx, "--max-depth", "0"])).trimEnd().split("\n");
    expect(shallow.at(-1)).toBe("Total: 1.5 USDC in 1 transaction by 1 agent");
  });

  it("explorer prints the link when no browser is available", async () => {
    const tx = await ok("GET", `/v1/transactions/${subTxs[0]}`);
    const run = await cli(["transactions", "explorer", subTxs[0]!]);
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(`${tx.solanaExplorer}\n`);
  });
});

describe("cli spend", () => {
  it("prints total, count, the protocol split with percents and the domains", async () => {
    const out = await cliOk(["spend", "--agent", "sub", "--window", "7d"]);
    expect(out).toMatch(/Agent:\s+sub/);
    expect(out).toMatch(/Window:\s+7d/);
    expect(out).toMatch(/Total spend:\s+0\.35 USDC/);
    expect(out).toMatch(/Transactions:\s+2/);
    expect(out).toMatch(/x402\s+0\.35 USDC\s+100\.00%\s+2/);
    expect(out).toMatch(/mpp\s+0 USDC\s+0\.00%\s+0/);
    expect(out).toMatch(/api\.data\.test\s+0\.35 USDC\s+100\.00%\s+2/);

    const all = await cliOk(["spend", "--window", "24h"]);
    expect(all).toMatch(/Agent:\s+all agents/);
    expect(all).toMatch(/Total spend:\s+1\.85 USDC/);
    expect(all).toMatch(/sub\.agents\.test\s+1\.5 USDC\s+81\.08%\s+1/);

    const json = JSON.parse(await cliOk(["spend", "--agent", "orch", "--window", "7d", "--json"]));
    expect(json).toMatchObject({ totalUnits: "1500000", txCount: 1 });
  });

  it("an unknown window is a usage error", async () => {
    const run = await cli(["spend", "--window", "2w"]);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain("--window must be one of 1h, 24h, 7d, 30d");
  });
});

describe("cli alerts", () => {
  it("create stores each type with its options; list shows them", async () => {
    const pct = await cli([
      "alerts",
      "create",
      "--agent",
      "orch",
      "--type",
      "budget_pct",
      "--threshold",
      "80",
      "--notify",
      "webhook:https://hooks.example.com/apg",
    ]);
    expect(pct.status).toBe(0);
    expect(pct.stdout).toMatch(/^Alert \S+ created\./);
    expect(pct.stdout).toMatch(/Threshold:\s+80%/);
    expect(pct.stdout).toMatch(/Signing secret \(shown once; verify deliveries with it\): \S+/);
    const rate = JSON.parse(
      await cliOk([
        "alerts",
        "create",
        "--agent",
        "orch",
        "--type",
        "spend_rate",
        "--threshold",
        "2.5",
        "--window",
        "1h",
        "--notify",
        "email:ops@example.com",
        "--json",
      ]),
    );
    expect(rate).toMatchObject({ agentId: "orch", type: "spend_rate", threshold: 2.5, window: "1h", notify: "email:ops@example.com" });
    await cliOk(["alerts", "create", "--agent", "sub", "--type", "policy_violation", "--notify", "email:ops@example.com"]);

    const stored = (await ok("GET", "/v1/alerts?agentId=orch")).alerts;
    expect(stored.map((alert: { type: string; threshold: number }) => [alert.type, alert.threshold]).sort()).toEqual([
      ["budget_pct", 80],
      ["spend_rate", 2.5],
    ]);
    const listed = await cliOk(["alerts", "list"]);
    expect(listed.trimEnd().split("\n")).toHaveLength(4);
    expect(listed).toMatch(/spend_rate\s+2\.5 USDC\s+1h\s+email:ops@example\.com/);
  });

  it("bad alert options are exit 2 and create nothing", async () => {
    const before = (await ok("GET", "/v1/alerts")).alerts.length;
    for (const argv of [
      ["alerts", "create", "--agent", "orch", "--type", "budget_pct", "--threshold", "80"],
      ["alerts", "create", "--agent", "orch", "--type", "spend_rate", "--threshold", "1", "--notify", "email:ops@example.com"],
      ["alerts", "create", "--agent", "orch", "--type", "budget", "--threshold", "1", "--notify", "email:ops@example.com"],
    ]) {
      expect((await cli(argv)).status).toBe(2);
    }
    expect((await ok("GET", "/v1/alerts")).alerts.length).toBe(before);
  });
});

describe("cli errors and configuration", () => {
  it("a wrong API key is exit 1 with AuthenticationError, and the key is never printed", async () => {
    const badKey = "apg_wrong_key_0123456789abcdef";
    const run = await cli(["transactions", "list", "--api-key", badKey]);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/^AuthenticationError: /);
    expect(run.stderr + run.stdout).not.toContain(badKey);
  });

  it("bad usage is exit 2", async () => {
    for (const argv of [
      ["transactions", "list", "--limit", "0"],
      ["transactions", "list", "--protocol", "card"],
      ["transactions"],
      ["policies", "set", "orch"],
    ]) {
      const run = await cli(argv);
      expect(run.status, argv.join(" ")).toBe(2);
      expect(run.stderr).toMatch(/^error: /);
    }
  });

  it("runs as a program: --base-url and the key from the environment, exit status through the process", async () => {
    const run = promisify(execFile);
    const entry = new URL("../../sdk/src/cli/main.ts", import.meta.url).pathname;
    const { stdout } = await run(
      process.execPath,
      ["--import", "tsx", entry, "transactions", "list", "--agent", "sub", "--base-url", system.apiUrl],
      {
        env: { ...process.env, APG_API_KEY: apiKey, APG_BASE_URL: "http://127.0.0.1:9" },
      },
    );
    expect(stdout).toContain(subTxs[0]!);
    const failed = await run(process.execPath, ["--import", "tsx", entry, "spend", "--window", "nope"], {
      env: { ...process.env, APG_API_KEY: apiKey },
    }).catch((error: { code: number; stderr: string }) => error);
    expect(failed).toMatchObject({ code: 2 });
  });
});
