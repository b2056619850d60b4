/**
 * The cli's pure parts: the rate-limit parser (every policy window and its spellings, refusals),
 * table formatting, the command line → command table, amounts as options, and the tree renderer
 * with its bigint total. The commands against the real system are in cli.test.ts.
 */
import { describe, expect, it } from "vitest";
import { parseCommandLine } from "../../sdk/src/cli/args.js";
import { alertBody, warningsOf } from "../../sdk/src/cli/commands/alerts.js";
import { percentText, policyPatch } from "../../sdk/src/cli/commands/policies.js";
import { renderSpend } from "../../sdk/src/cli/commands/spend.js";
import { renderTransactionList, renderTree } from "../../sdk/src/cli/commands/transactions.js";
import { browserOpener } from "../../sdk/src/cli/explorer.js";
import { amountOption, decimalNumberOption } from "../../sdk/src/cli/input.js";
import { runCli } from "../../sdk/src/cli/main.js";
import { formatRateLimit, parseRateLimit, parseRateWindow } from "../../sdk/src/cli/rate-limit.js";
import { formatFields, formatTable } from "../../sdk/src/cli/table.js";
import { EXIT_API_ERROR, EXIT_USAGE, exitStatusOf, UsageError } from "../../sdk/src/cli/usage.js";
import { InvalidInputError } from "../../sdk/src/text-input.js";
import {
  AuthenticationError,
  BudgetExceededError,
  DailyBudgetExceededError,
  DomainNotAllowedError,
  InsufficientFundsError,
  PaymentError,
  PaymentProtocolError,
  PolicyViolationError,
  ServiceError,
} from "../../sdk/src/errors.js";

describe("rate-limit parser", () => {
  it.each([
    ["100 per minute", 100, "1m"],
    ["100 per min", 100, "1m"],
    ["5 per 1m", 5, "1m"],
    ["5 per 60s", 5, "1m"],
    ["10 per 5m", 10, "5m"],
    ["10 per 5 minutes", 10, "5m"],
    ["10 per 5min", 10, "5m"],
    ["20 per 15m", 20, "15m"],
    ["20 per 15 minutes", 20, "15m"],
    ["20 per quarter-hour", 20, "15m"],
    ["1000 per hour", 1000, "1h"],
    ["1000 per 1h", 1000, "1h"],
    ["1000 per 60 minutes", 1000, "1h"],
    ["1000 PER Hour", 1000, "1h"],
    ["7 per day", 7, "24h"],
    ["7 per 24h", 7, "24h"],
    ["7 per 1d", 7, "24h"],
    ["7/hour", 7, "1h"],
    ["  3  per   hour  ", 3, "1h"],
  ])("%j is %i calls per %s", (text, calls, window) => {
    expect(parseRateLimit(text)).toEqual({ calls, window });
  });

  it("none removes the limit", () => {
    expect(parseRateLimit("none")).toBeNull();
    expect(parseRateLimit("NONE")).toBeNull();
  });

  it.each([
    "100",
    "per hour",
    "0 per hour",
    "-1 per hour",
    "1.5 per hour",
    "10 per 10m",
    "10 per 2h",
    "10 per week",
    "10 per",
    "10 per 0m",
    "1000001 per hour",
    "ten per hour",
  ])("refuses %j with a usage error", (text) => {
    expect(() => parseRateLimit(text)).toThrow(UsageError);
  });

  it("a span that is not a policy window names the allowed ones", () => {
    expect(() => parseRateWindow("10m")).toThrow(/minute \(1m\), 5m, 15m, hour \(1h\) or day \(24h\)/);
  });

  it("formats back to a form it reads", () => {
    for (const window of ["1m", "5m", "15m", "1h", "24h"] as const) {
      expect(parseRateLimit(formatRateLimit({ calls: 42, window }))).toEqual({ calls: 42, window });
    }
  });
});

describe("table formatting", () => {
  it("aligns columns, right-aligns amounts, ends no line with spaces", () => {
    const table = formatTable(
      [{ header: "HASH" }, { header: "AMOUNT", align: "right" }, { header: "ENDPOINT" }],
      [
        ["abc", "1.5 USDC", "api.example.com/v1"],
        ["longer-hash", "12 USDC", "x.io"],
      ],
    );
    expect(table.split("\n")).toEqual([
      "HASH           AMOUNT  ENDPOINT",
      "abc          1.5 USDC  api.example.com/v1",
      "longer-hash   12 USDC  x.io",
    ]);
  });

  it("a newline in a cell cannot add a row", () => {
    const table = formatTable([{ header: "A" }, { header: "B" }], [["x\nFAKE ROW", "y"]]);
    expect(table.split("\n")).toHaveLength(2);
  });

  it("a row with the wrong number of cells is a bug, not a shifted table", () => {
    expect(() => formatTable([{ header: "A" }], [["1", "2"]])).toThrow(RangeError);
  });

  it("fields align their values", () => {
    expect(
      formatFields([
        ["Agent", "a"],
        ["Daily budget", "none"],
      ]),
    ).toBe("Agent:         a\nDaily budget:  none");
  });
});

describe("command line", () => {
  it("resolves commands, positionals and options wherever they are placed", () => {
    const parsed = parseCommandLine(["--api-key", "k", "policies", "set", "bot-1", "--daily-budget", "10"]);
    expect(parsed.command).toBe("policies set");
    expect(parsed.args).toEqual({ agent: "bot-1" });
    expect(parsed.options["daily-budget"]).toBe("10");
  });

  it.each([
    [[], /no command/],
    [["nope"], /unknown command "nope"/],
    [["transactions"], /needs a subcommand/],
    [["transactions", "list", "--window", "7d"], /takes no option --window/],
    [["policies", "get"], /needs <agent>/],
    [["policies", "get", "a", "b"], /unexpected argument "b"/],
    [["spend", "--bogus"], /^unknown option --bogus$/],
    [["spend", "--agent"], /^--agent needs a value$/],
    [["spend", "--json=1"], /^--json takes no value$/],
  ])("%j is a usage error", (argv, message) => {
    expect(() => parseCommandLine(argv as string[])).toThrow(message);
  });

  it("policy options become the PUT body; none is null; nothing given is a usage error", () => {
    expect(
      policyPatch({
        "daily-budget": "12.5",
        "per-call-limit": "none",
        "allowed-domains": "a.com, api.b.com",
        "blocked-domains": "none",
        "rate-limit": "100 per hour",
      }),
    ).toEqual({
      dailyBudget: { usdc: 12.5 },
      perCallLimit: null,
      allowedDomains: ["a.com", "api.b.com"],
      blockedDomains: [],
      rateLimit: { calls: 100, window: "1h" },
    });
    expect(() => policyPatch({})).toThrow(/at least one/);
    expect(() => policyPatch({ "allowed-domains": "https://a.com/x" })).toThrow(/not a domain/);
    expect(() => policyPatch({ "protocol-preference": "card" })).toThrow(/auto, x402, mpp/);
  });

  it("amounts are exact decimals: at most 6 places, positive, no exponent, none removes", () => {
    expect(amountOption("0.000001", "daily-budget")).toEqual({ usdc: 0.000001 });
    expect(amountOption("1234567.891011", "daily-budget")).toEqual({ usdc: 1234567.891011 });
    expect(amountOption("none", "daily-budget")).toBeNull();
    for (const bad of ["0", "0.0000001", "-1", "1e3", "abc", "", "1,5"])
      expect(() => amountOption(bad, "daily-budget")).toThrow(UsageError);
    // Past 2^33 usdc a double cannot hold every 6-decimal amount: refused, not rounded.
    expect(() => amountOption("8600000000.000001", "daily-budget")).toThrow(/exactly/);
  });

  it("alert options are checked per type before sending", () => {
    expect(alertBody({ agent: "a", type: "budget_pct", threshold: "80", notify: "webhook:https://hooks.example.com/x" })).toEqual({
      agentId: "a",
      type: "budget_pct",
      threshold: 80,
      notify: "webhook:https://hooks.example.com/x",
    });
    expect(alertBody({ agent: "a", type: "spend_rate", threshold: "2.5", window: "1h", notify: "email:ops@example.com" })).toMatchObject({
      threshold: 2.5,
      window: "1h",
    });
    expect(() => alertBody({ agent: "a", type: "spend_rate", threshold: "2.5", notify: "email:ops@example.com" })).toThrow(
      /needs --window/,
    );
    expect(() => alertBody({ agent: "a", type: "budget_pct", threshold: "80", window: "1h", notify: "email:ops@example.com" })).toThrow(
      /spend_rate only/,
    );
    expect(() => alertBody({ agent: "a", type: "policy_violation", threshold: "1", notify: "email:ops@example.com" })).toThrow(
      /no --threshold/,
    );
    expect(() => alertBody({ agent: "a", type: "slack", notify: "email:ops@example.com" })).toThrow(
      /budget_pct, spend_rate, policy_violation, approval_requested/,
    );
    expect(alertBody({ agent: "a", type: "approval_requested", notify: "email:ops@example.com" })).toEqual({
      agentId: "a",
      type: "approval_requested",
      notify: "email:ops@example.com",
    });
    expect(() => alertBody({ agent: "a", type: "approval_requested", window: "1h", notify: "email:ops@example.com" })).toThrow(
      /approval_requested takes no --threshold or --window/,
    );
    expect(() => alertBody({ agent: "a", type: "policy_violation", notify: "sms:123" })).toThrow(/webhook:/);
    expect(() => decimalNumberOption("1e2", "threshold")).toThrow(UsageError);
  });

  it("percent of money is computed in bigint, truncated to two places", () => {
    expect(percentText(1n, 3n)).toBe("33.33%");
    expect(percentText(250_000n, 10_000_000n)).toBe("2.50%");
    expect(percentText(10n, 10n)).toBe("100.00%");
  });

  it("a browser is opened only in a desktop session, never in CI", () => {
    expect(browserOpener({}, "linux")).toBeNull();
    expect(browserOpener({ DISPLAY: ":0" }, "linux")).toEqual({ command: "xdg-open", args: [] });
    expect(browserOpener({ DISPLAY: ":0", CI: "true" }, "linux")).toBeNull();
    expect(browserOpener({}, "darwin")).toEqual({ command: "open", args: [] });
  });
});

describe("renderers", () => {
  const tx = (hash: string, usdc: number, extra: Record<string, unknown> = {}) => ({
    txHash: hash,
    agentId: "a",
    protocol: "x402",
    amountPaid: { usdc },
    endpoint: "https://api.example.com/v1/data",
    timestamp: "2026-01-01T00:00:00.000Z",
    status: "confirmed",
    ...extra,
  });

  it("the listing has the spec's columns, endpoints without scheme, and STATUS only with a rejected row", () => {
    const plain = renderTransactionList([tx("h1", 0.25)]).split("\n");
    expect(plain[0]).toMatch(/^TX HASH\s+PROTOCOL\s+AMOUNT\s+ENDPOINT\s+TIME$/);
    expect(plain[1]).toContain("0.25 USDC  api.example.com/v1/data");
    const withRejected = renderTransactionList([
      tx("h1", 0.25),
      tx("", 3, { txHash: null, status: "rejected", rejectionCode: "per_call_limit_exceeded" }),
    ]);
    expect(withRejected.split("\n")[0]).toMatch(/TIME\s+STATUS$/);
    expect(withRejected).toContain("rejected (per_call_limit_exceeded)");
  });

  it("the tree nests children under parents and totals in base units (0.1 + 0.2 is 0.3 exactly)", () => {
    const out = renderTree({
      rootTxHash: "root",
      transactions: [
        tx("root", 0.1, { depth: 0, parentTxHash: null, agentId: "orch" }),
        tx("child", 0.2, { depth: 1, parentTxHash: "root", agentId: "sub" }),
        tx("grandchild", 0.000001, { depth: 2, parentTxHash: "child", agentId: "sub" }),
      ],
      truncated: false,
    }).split("\n");
    expect(out[1]).toMatch(/^root\s+orch/);
    expect(out[2]).toMatch(/^└─ child\s+sub/);
    expect(out[3]).toMatch(/^ {3}└─ grandchild\s+sub/);
    expect(out.at(-1)).toBe("Total: 0.300001 USDC in 3 transactions by 2 agents");
  });

  it("spend lists both protocols and the domains with percents", () => {
    const out = renderSpend({
      agentId: "a",
      window: "7d",
      from: "f",
      to: "t",
      total: "1",
      totalUnits: "1000000",
      txCount: 3,
      byProtocol: [{ protocol: "x402", amountUnits: "1000000", txCount: 3 }],
      byDomain: [
        { domain: "api.example.com", amountUnits: "750000", txCount: 2 },
        { domain: "b.io", amountUnits: "250000", txCount: 1 },
      ],
    });
    expect(out).toMatch(/Total spend:\s+1 USDC/);
    expect(out).toMatch(/x402\s+1 USDC\s+100\.00%\s+3/);
    expect(out).toMatch(/mpp\s+0 USDC\s+0\.00%\s+0/);
    expect(out).toMatch(/api\.example\.com\s+0\.75 USDC\s+75\.00%\s+2/);
    expect(out).not.toContain("warning");
  });
});

describe("exit status", () => {
  it("is derived from the error's class: UsageError 2, every ServiceError class 1, anything else 1", () => {
    expect(exitStatusOf(new UsageError("bad option"))).toBe(EXIT_USAGE);
    expect(exitStatusOf(new InvalidInputError("name", "contains a control character"))).toBe(EXIT_USAGE);
    for (const error of [
      new ServiceError("x", { code: "NOT_FOUND", status: 404 }),
      new PolicyViolationError("per_call_limit_exceeded: requested 2 usdc, limit is 1 usdc"),
      new DailyBudgetExceededError("daily_budget_exceeded: requested 2 usdc, limit is 1 usdc"),
      new DomainNotAllowedError("domain_not_allowed: ...", "evil.example"),
      new BudgetExceededError("invocation_budget_exceeded: ..."),
      new InsufficientFundsError("insufficient funds", { usdc: 1 }),
      new PaymentProtocolError("unknown protocol", "https://x.example"),
      new PaymentError("failed"),
      new AuthenticationError("invalid API key"),
      new Error("a bug"),
    ]) {
      expect(exitStatusOf(error), error.name).toBe(EXIT_API_ERROR);
    }
  });
});

describe("runCli without a gateway", () => {
  const io = (env: Record<string, string> = {}) => {
    const stdout: string[] = [];
    const stderr: string[] = [];
    return {
      stdout,
      stderr,
      io: { env, stdout: { write: (s: string) => stdout.push(s) }, stderr: { write: (s: string) => stderr.push(s) } },
    };
  };

  it("--help exits 0 with the commands", async () => {
    const run = io();
    expect(await runCli(["--help"], run.io)).toBe(0);
    expect(run.stdout.join("")).toContain("transactions tree <rootTxHash>");
    const sub = io();
    expect(await runCli(["alerts", "create", "--help"], sub.io)).toBe(0);
    expect(sub.stdout.join("")).toContain("--notify");
  });

  it("bad usage exits 2 before any request, and never echoes the key", async () => {
    const run = io({ APG_API_KEY: "sk_secret_env_key" });
    expect(await runCli(["policies", "set", "a", "--daily-budget", "sk_secret_env_key"], run.io)).toBe(2);
    const text = run.stderr.join("");
    expect(text).toContain("--daily-budget");
    expect(text).not.toContain("sk_secret_env_key");
  });

  it("a bad option value is exit 2 even without a key: usage is judged first", async () => {
    for (const argv of [
      ["transactions", "list", "--limit", "0"],
      ["spend", "--window", "2w"],
      ["alerts", "create", "--agent", "a", "--type", "x", "--notify", "email:a@b.c"],
    ]) {
      const run = io();
      expect(await runCli(argv, run.io)).toBe(2);
    }
  });

  it("no key is an AuthenticationError (exit 1)", async () => {
    const run = io();
    expect(await runCli(["spend"], run.io)).toBe(1);
    expect(run.stderr.join("")).toMatch(/^AuthenticationError: no API key/);
  });

  it("a base URL that is not http(s) is a usage error", async () => {
    const run = io({ APG_API_KEY: "k" });
    expect(await runCli(["spend", "--base-url", "ftp://x"], run.io)).toBe(2);
  });
});

describe("output redaction", () => {
  it("the API key is blanked from anything written; a too-short value is left alone", async () => {
    const { redactingWriter } = await import("../../sdk/src/cli/context.js");
    const lines: string[] = [];
    const write = redactingWriter({ write: (s: string) => lines.push(s) }, "apg_live_secret_123");
    write("GET http://x/?k=apg_live_secret_123 failed");
    expect(lines).toEqual(["GET http://x/?k=[redacted] failed\n"]);
    const short: string[] = [];
    redactingWriter({ write: (s: string) => short.push(s) }, "k")("keep");
    expect(short).toEqual(["keep\n"]);
  });
});

describe("input the cli refuses itself (exit 2, nothing sent)", () => {
  const run = async (argv: string[]): Promise<{ status: number; stderr: string }> => {
    const stderr: string[] = [];
    const status = await runCli(argv, {
      env: { APG_API_KEY: "k".repeat(16), APG_BASE_URL: "http://127.0.0.1:9" },
      stdout: { write: () => true },
      stderr: { write: (s: string) => stderr.push(s) },
      maxRetries: 0,
    });
    // Port 9 refuses connections: a request sent would have ended as exit 1 with a PaymentError.
    return { status, stderr: stderr.join("") };
  };

  it.each([
    [["policies", "set", "a", "--daily-budget", "-5"], /^error: --daily-budget must not be negative, got "-5"$/m],
    [["policies", "set", "a", "--per-call-limit", "-0.5"], /^error: --per-call-limit must not be negative/m],
    [["policies", "set", "a", "--daily-budget", "five"], /^error: --daily-budget must be a usdc amount/m],
    [["alerts", "create", "--agent", "a", "--type", "budget_pct", "--threshold", "150", "--notify", "email:a@b.co"], /at most 100/],
    [["alerts", "create", "--agent", "a", "--type", "budget_pct", "--threshold", "0", "--notify", "email:a@b.co"], /above 0/],
    [
      ["alerts", "create", "--agent", "a", "--type", "spend_rate", "--threshold", "-2", "--window", "1h", "--notify", "email:a@b.co"],
      /must not be negative/,
    ],
    [["policies", "set", "a\u0000b", "--daily-budget", "5"], /contains a control character \(U\+0000\)/],
    [["agents", "create", "x", "--name", "a\ud800"], /--name contains a lone surrogate \(U\+D800\)/],
    [["policies", "set", "a", "--allowed-domains", "a.com,b\u0007.com"], /--allowed-domains contains a control character/],
    [["agents", "create", "-bad"], /unknown option -b|agentId/],
    [["agents", "create", "has.space here"], /agentId/],
    [["alerts", "delete", "42"], /alertId/],
  ])("%j", async (argv, message) => {
    const result = await run(argv);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).not.toMatch(/ambiguous|Did you forget/);
  });
});

describe("spend's domain rows add up to the total", () => {
  it("says what the 50 listed domains leave out", () => {
    const byDomain = Array.from({ length: 50 }, (_, index) => ({ domain: `d${index}.example.com`, amountUnits: "10000", txCount: 1 }));
    const out = renderSpend({
      agentId: null,
      window: "24h",
      from: "f",
      to: "t",
      total: "0.9",
      totalUnits: "900000",
      txCount: 62,
      byProtocol: [{ protocol: "x402", amountUnits: "900000", txCount: 62 }],
      byDomain,
    });
    expect(out).toMatch(/^and more domains beyond these 50: 0\.4 USDC in 12 transactions \(44\.44%\)$/m);
  });

  it("adds nothing when the listed domains are the whole total", () => {
    const out = renderSpend({
      agentId: null,
      window: "24h",
      from: "f",
      to: "t",
      total: "0.01",
      totalUnits: "10000",
      txCount: 1,
      byProtocol: [{ protocol: "x402", amountUnits: "10000", txCount: 1 }],
      byDomain: [{ domain: "a.com", amountUnits: "10000", txCount: 1 }],
    });
    expect(out).not.toMatch(/more domains/);
  });
});

describe("alert answers with warnings", () => {
  it("are printed as warning lines", () => {
    expect(warningsOf({ warnings: ["no mail transport is configured: email alerts are not sent"] })).toEqual([
      "no mail transport is configured: email alerts are not sent",
    ]);
    expect(warningsOf({ warnings: [{ code: "NO_MAIL_TRANSPORT", message: "not sent" }] })).toEqual(["not sent"]);
    expect(warningsOf({})).toEqual([]);
  });
});
