/**
 * The TypeScript client's approvals against the contract of docs/rest.md "Approvals", served by a
 * real loopback HTTP server that answers as the contract says (the gateway's routes are tested
 * against the same contract where they live): the requests `approvals.*` and `cli approvals` send,
 * the long-poll's bounded wait, and the errors: APPROVAL_DENIED / APPROVAL_EXPIRED as
 * PolicyViolationError, a second decision as APPROVAL_ALREADY_DECIDED, and the 202 of a held
 * payment as ApprovalRequiredError.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { runCli } from "../../sdk/src/cli/main.js";
import { EXIT_API_ERROR, EXIT_OK, EXIT_USAGE } from "../../sdk/src/cli/usage.js";
import {
  ApprovalRequiredError,
  approvalRequiredFrom,
  CLIENT_ERROR_CODES,
  Client,
  errorFromProblem,
  InvalidInputError,
  PolicyViolationError,
  ServiceError,
} from "../../sdk/src/index.js";

const ID = "6f1c2a3b-0000-4000-8000-00000000a001";
const APPROVAL = {
  id: ID,
  agentId: "researcher",
  status: "pending",
  amount: { usdc: 6 },
  endpoint: "https://api.example.com/v1/report",
  domain: "api.example.com",
  rule: "above",
  reason: "approval_required: 6 usdc is above the approval threshold of 5 usdc",
  requestedAt: "2026-03-01T12:00:00.000Z",
  expiresAt: "2026-03-01T12:15:00.000Z",
  decidedAt: null,
  decidedBy: null,
  note: null,
  outcome: null,
};

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

const servers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((close) => close()));
});

/** A loopback gateway answering each request with `reply(seen)` → [status, body]. */
async function gateway(reply: (seen: Seen, index: number) => [number, unknown]): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((request, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const entry = {
        method: request.method ?? "",
        url: request.url ?? "",
        headers: request.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      seen.push(entry);
      const [status, body] = reply(entry, seen.length - 1);
      const problem = status >= 400;
      response.writeHead(status, { "content-type": problem ? "application/problem+json" : "application/json" });
      response.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

function client(baseUrl: string, timeout = 30_000): Client {
  return new Client({ agentId: "researcher", apiKey: "apg_test_key_0123456789", baseUrl, timeout, maxRetries: 0 });
}

describe("approvals resource", () => {
  it("lists with the filters as query parameters and returns the page", async () => {
    const { url, seen } = await gateway(() => [200, { approvals: [APPROVAL], nextCursor: "abc" }]);
    const page = await client(url).approvals.list({ status: "pending", agentId: "researcher", limit: 10, cursor: "xyz" });
    expect(page).toEqual({ approvals: [APPROVAL], nextCursor: "abc" });
    const sent = new URL(seen[0]!.url, url);
    expect(seen[0]!.method).toBe("GET");
    expect(sent.pathname).toBe("/v1/approvals");
    expect(Object.fromEntries(sent.searchParams)).toEqual({ status: "pending", agentId: "researcher", limit: "10", cursor: "xyz" });
  });

  it("refuses a bad status, limit or id before any request", async () => {
    const { url, seen } = await gateway(() => [200, {}]);
    const approvals = client(url).approvals;
    await expect(approvals.list({ status: "maybe" as never })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(approvals.list({ limit: 0 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(approvals.get("../agents")).rejects.toBeInstanceOf(InvalidInputError);
    await expect(approvals.approve("nope")).rejects.toBeInstanceOf(InvalidInputError);
    await expect(approvals.deny(ID, { note: "x".repeat(501) })).rejects.toBeInstanceOf(InvalidInputError);
    expect(seen).toEqual([]);
  });

  it("get long-polls with wait, capped at 60 s and below the per-request timeout", async () => {
    const { url, seen } = await gateway(() => [200, APPROVAL]);
    expect(await client(url, 120_000).approvals.get(ID, { wait: 300 })).toEqual(APPROVAL);
    await client(url, 10_000).approvals.get(ID, { wait: 30 });
    await client(url).approvals.get(ID);
    expect(seen.map((s) => s.url)).toEqual([`/v1/approvals/${ID}?wait=60`, `/v1/approvals/${ID}?wait=9`, `/v1/approvals/${ID}`]);
  });

  it("waitForDecision repeats the long-poll until the approval is decided", async () => {
    const { url, seen } = await gateway((_, index) => [200, index < 2 ? APPROVAL : { ...APPROVAL, status: "approved", decidedBy: "42" }]);
    const decided = await client(url).approvals.waitForDecision(ID, { timeoutMs: 120_000 });
    expect(decided).toMatchObject({ status: "approved", decidedBy: "42" });
    expect(seen).toHaveLength(3);
    expect(seen.every((s) => /\?wait=\d+$/.test(s.url))).toBe(true);
  });

  it("waitForDecision answers the approval still pending once its time is up", async () => {
    const { url, seen } = await gateway(() => [200, APPROVAL]);
    let clock = 0;
    const pending = await client(url).approvals.waitForDecision(ID, {
      timeoutMs: 2_000,
      now: () => {
        clock += 1_500;
        return clock;
      },
    });
    expect(pending.status).toBe("pending");
    expect(seen.length).toBeLessThanOrEqual(2);
  });

  it("waitForDecision paces its polls itself when the per-request timeout leaves the gateway no wait", async () => {
    const { url, seen } = await gateway(() => [200, APPROVAL]);
    const started = Date.now();
    const pending = await client(url, 1_000).approvals.waitForDecision(ID, { timeoutMs: 2_500 });
    expect(pending.status).toBe("pending");
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_900);
    // One poll a second at most, each with no wait (a 1 s per-request timeout leaves none).
    expect(seen.length).toBeLessThanOrEqual(4);
    expect(seen.every((s) => !s.url.includes("wait="))).toBe(true);
  });

  it("the gateway's wrapped answers ({ approval, outcome }) are read as the approval", async () => {
    const { url } = await gateway((s) =>
      s.method === "GET" ? [200, { approval: APPROVAL }] : [200, { approval: { ...APPROVAL, status: "approved" }, outcome: "authorized" }],
    );
    expect(await client(url).approvals.get(ID)).toEqual(APPROVAL);
    expect(await client(url).approvals.approve(ID)).toEqual({ ...APPROVAL, status: "approved", outcome: "authorized" });
  });

  it("approve and deny POST the note with an Idempotency-Key and return the decided approval", async () => {
    const { url, seen } = await gateway((s) => [
      200,
      { ...APPROVAL, status: s.url.endsWith("/approve") ? "approved" : "denied", decidedBy: "42", note: JSON.parse(s.body).note ?? null },
    ]);
    const approvals = client(url).approvals;
    expect(await approvals.approve(ID, { note: "ok", idempotencyKey: "decide-1" })).toMatchObject({ status: "approved", note: "ok" });
    expect(await approvals.deny(ID)).toMatchObject({ status: "denied", note: null });
    expect(seen.map((s) => [s.method, s.url, s.body])).toEqual([
      ["POST", `/v1/approvals/${ID}/approve`, '{"note":"ok"}'],
      ["POST", `/v1/approvals/${ID}/deny`, "{}"],
    ]);
    expect(seen[0]!.headers["idempotency-key"]).toBe("decide-1");
    expect(seen[1]!.headers["idempotency-key"]).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("a second decision is a ServiceError with code APPROVAL_ALREADY_DECIDED (not retried)", async () => {
    const { url, seen } = await gateway(() => [
      409,
      {
        code: "APPROVAL_ALREADY_DECIDED",
        status: 409,
        detail: `approval ${ID} was already decided: denied`,
        approval: { status: "denied" },
      },
    ]);
    const error = await client(url)
      .approvals.approve(ID)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).not.toBeInstanceOf(PolicyViolationError);
    expect(error).toMatchObject({ code: "APPROVAL_ALREADY_DECIDED", status: 409 });
    expect(seen).toHaveLength(1);
  });
});

describe("approval errors", () => {
  it("APPROVAL_DENIED and APPROVAL_EXPIRED are PolicyViolationErrors with their reason codes, with or without errorClass", () => {
    for (const withClass of [true, false]) {
      const denied = errorFromProblem(403, {
        code: "APPROVAL_DENIED",
        ...(withClass ? { errorClass: "PolicyViolationError" } : {}),
        reasonCode: "approval_denied",
        reason: `approval_denied: approval ${ID} was denied: not today`,
      });
      expect(denied).toBeInstanceOf(PolicyViolationError);
      expect(denied).toMatchObject({ code: "APPROVAL_DENIED", reasonCode: "approval_denied" });
      const expired = errorFromProblem(403, {
        code: "APPROVAL_EXPIRED",
        ...(withClass ? { errorClass: "PolicyViolationError" } : {}),
        reason: `approval_expired: approval ${ID} was not decided before 2026-03-01T12:15:00.000Z`,
      });
      expect(expired).toBeInstanceOf(PolicyViolationError);
      expect(expired).toMatchObject({ code: "APPROVAL_EXPIRED", reasonCode: "approval_expired" });
    }
  });

  it("APPROVAL_NOT_FOUND is a plain ServiceError", () => {
    const error = errorFromProblem(404, { code: "APPROVAL_NOT_FOUND", detail: `approval ${ID} not found` });
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).not.toBeInstanceOf(PolicyViolationError);
    expect(error.code).toBe("APPROVAL_NOT_FOUND");
  });

  it("the 202 of a held payment becomes ApprovalRequiredError: a ServiceError with the approval id and expiry", () => {
    const error = approvalRequiredFrom({ approval: APPROVAL }, 202, "req-1");
    expect(error).toBeInstanceOf(ApprovalRequiredError);
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).not.toBeInstanceOf(PolicyViolationError);
    expect(error).toMatchObject({
      name: "ApprovalRequiredError",
      code: "APPROVAL_PENDING",
      status: 202,
      approvalId: ID,
      expiresAt: APPROVAL.expiresAt,
      requestId: "req-1",
    });
    expect(error!.message).toContain(APPROVAL.reason);
    expect(CLIENT_ERROR_CODES).toContain("APPROVAL_PENDING");
    expect(approvalRequiredFrom({ approval: { id: ID } })).toBeNull();
    expect(approvalRequiredFrom({ paid: true })).toBeNull();
  });

  it("instanceof works by brand across copies of the class", () => {
    const foreign = Object.assign(Object.create(Error.prototype), {
      [Symbol.for("agent-payment-gateway.sdk.error")]: "ApprovalRequiredError",
    });
    expect(foreign).toBeInstanceOf(ApprovalRequiredError);
    expect(foreign).toBeInstanceOf(ServiceError);
  });
});

describe("cli approvals", () => {
  function io(env: Record<string, string>) {
    const out: string[] = [];
    const err: string[] = [];
    return {
      out,
      err,
      run: (argv: string[]) =>
        runCli(argv, { env, stdout: { write: (c: string) => out.push(c) }, stderr: { write: (c: string) => err.push(c) }, maxRetries: 0 }),
    };
  }

  it("list prints the queue and the next page's command", async () => {
    const { url, seen } = await gateway(() => [200, { approvals: [APPROVAL], nextCursor: "next-1" }]);
    const cli = io({ APG_API_KEY: "apg_test_key_0123456789", APG_BASE_URL: url });
    expect(await cli.run(["approvals", "list", "--status", "pending", "--agent", "researcher", "--limit", "5"])).toBe(EXIT_OK);
    expect(new URL(seen[0]!.url, url).search).toBe("?status=pending&agentId=researcher&limit=5");
    const printed = cli.out.join("");
    expect(printed).toMatch(new RegExp(`${ID}\\s+researcher\\s+6 USDC\\s+api\\.example\\.com/v1/report\\s+above\\s+pending`));
    expect(printed).toContain("cli approvals list --after next-1");
  });

  it("approve and deny send the note and print the decision", async () => {
    const { url, seen } = await gateway((s) => [
      200,
      { ...APPROVAL, status: s.url.endsWith("/approve") ? "approved" : "denied", decidedBy: "42" },
    ]);
    const cli = io({ APG_API_KEY: "apg_test_key_0123456789", APG_BASE_URL: url });
    expect(await cli.run(["approvals", "approve", ID, "--note", "fine"])).toBe(EXIT_OK);
    expect(await cli.run(["approvals", "deny", ID])).toBe(EXIT_OK);
    expect(seen.map((s) => [s.url, s.body])).toEqual([
      [`/v1/approvals/${ID}/approve`, '{"note":"fine"}'],
      [`/v1/approvals/${ID}/deny`, "{}"],
    ]);
    expect(cli.out.join("")).toContain(`Approval ${ID} approved.`);
    expect(cli.out.join("")).toContain(`Approval ${ID} denied.`);
  });

  it("a refusal of the gateway exits 1 naming its code; bad usage exits 2 before any request", async () => {
    const { url, seen } = await gateway(() => [
      403,
      { code: "FORBIDDEN_SCOPE", detail: "a key of scope agent:researcher cannot decide approvals" },
    ]);
    const cli = io({ APG_API_KEY: "apg_test_key_0123456789", APG_BASE_URL: url });
    expect(await cli.run(["approvals", "approve", ID])).toBe(EXIT_API_ERROR);
    expect(cli.err.join("")).toContain("[FORBIDDEN_SCOPE]");
    expect(seen).toHaveLength(1);
    expect(await cli.run(["approvals", "approve", "not-an-id"])).toBe(EXIT_USAGE);
    expect(await cli.run(["approvals", "list", "--status", "maybe"])).toBe(EXIT_USAGE);
    expect(await cli.run(["approvals", "list", "--limit", "0"])).toBe(EXIT_USAGE);
    expect(await cli.run(["approvals", "deny", ID, "--note", "x".repeat(501)])).toBe(EXIT_USAGE);
    expect(await cli.run(["approvals", "deny", ID, "--force"])).toBe(EXIT_USAGE);
    expect(seen).toHaveLength(1);
  });

  it("has help for each subcommand and lists them in the global help", async () => {
    const cli = io({});
    expect(await cli.run(["approvals", "approve", "--help"])).toBe(EXIT_OK);
    expect(cli.out.join("")).toContain("Usage: cli approvals approve <approvalId> [--note <text>] [--json]");
    expect(await cli.run(["--help"])).toBe(EXIT_OK);
    expect(cli.out.join("")).toContain("approvals deny <approvalId>");
  });
});
