/**
 * Alert rules (spec 2.10) evaluated in the gateway's payment transactions, against a real Postgres,
 * delivered by the dispatcher to real receivers on loopback: a webhook receiver and a real SMTP
 * server (smtp-server).
 */
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { describe, expect, it } from "vitest";
import {
  createAlert,
  deleteAlert,
  emitPaymentEvents,
  emitRejectionEvents,
  getAlert,
  InvalidAlertError,
  listAlerts,
  parseAlertOptions,
} from "../../api/gateway/events/index.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import { reserveInTransaction } from "../../api/gateway/reservations/store.js";
import { recordRejection } from "../../api/gateway/payments/rejections.js";
import { holdPayment } from "../../api/gateway/payments/approvals/index.js";
import { reserveOrHoldInTransaction } from "../../api/gateway/reservations/store.js";
import { deleteWebhookEndpoint, type Dispatcher, type Mailer, smtpMailer } from "../../api/gateway/webhooks/index.js";
import { verifyStandardWebhook } from "./support/webhook-receiver.js";
import { webhookSuite } from "./support/webhooks.js";

const USDC = 1_000_000n;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const T0 = new Date("2026-03-01T12:00:00.000Z");
const at = (ms: number) => new Date(T0.getTime() + ms);
const ENDPOINT = "https://api.example.com/v1/data";

const suite = webhookSuite("alerts");
const { receiver, account } = suite;

/** What the gateway does for one payment: reserve (or reject), then emit events, in one transaction. */
async function pay(agentId: string, amountUnits: bigint, when: Date, commit = true): Promise<string[]> {
  return suite.transaction(
    async (client) => {
      const { decision } = await reserveInTransaction(client, agentId, { endpoint: ENDPOINT, amountUnits }, when);
      if (decision.decision === "allow") {
        const emitted = await emitPaymentEvents(client, { agentId, decision, at: when });
        return emitted.alerts.map((a) => a.eventId);
      }
      await recordRejection(client, {
        agentId,
        amountUnits,
        endpoint: "api.example.com/v1/data",
        domain: decision.domain,
        protocol: decision.protocol,
        reasonCode: decision.reasonCode,
        reason: decision.reason,
        at: when,
      });
      const emitted = await emitRejectionEvents(client, { agentId, decision, endpoint: ENDPOINT, at: when });
      return emitted.alerts.map((a) => a.eventId);
    },
    { commit },
  );
}

function dispatcher(mailer: Mailer | null = null, slackHosts?: string[]): Dispatcher {
  return suite.dispatcher({ mailer, timeoutMs: 5_000, leaseMs: 10_000, ...(slackHosts === undefined ? {} : { slackHosts }) });
}

async function drain(d: Dispatcher): Promise<void> {
  while ((await d.runOnce()).length > 0);
}

async function alertEvents(alertId: string): Promise<Array<Record<string, unknown>>> {
  const { rows } = await suite.pool.query<{ payload: Record<string, unknown> }>(
    "SELECT payload FROM gateway_events WHERE alert_id = $1 ORDER BY created_at, id",
    [alertId],
  );
  return rows.map((r) => r.payload);
}

/** An SMTP server on loopback keeping every mail it receives, and a mailer sending to it. */
async function smtpSink(): Promise<{ mails: Array<{ to: string[]; raw: string }>; smtp: SMTPServer; mailer: Mailer }> {
  const mails: Array<{ to: string[]; raw: string }> = [];
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks).toString("utf8") });
        callback();
      });
    },
  });
  await new Promise<void>((done) => smtp.listen(0, "127.0.0.1", done));
  const mailer = smtpMailer(`smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`, "Gateway <alerts@gateway.test>");
  return { mails, smtp, mailer };
}

describe("budget_pct", () => {
  it("fires when consumption crosses the threshold, once per budget period, not on every payment", async () => {
    const { accountId, agentId } = await account();
    await putPolicy(suite.pool, agentId, { dailyBudgetUnits: 10n * USDC });
    const r = await receiver();
    const input = parseAlertOptions({ agent: agentId, type: "budget_pct", threshold: 50, notify: `webhook:${r.url}` });
    const { alert, signingSecret } = await createAlert(suite.pool, suite.box, accountId, input);

    expect(await pay(agentId, 2n * USDC, at(0))).toEqual([]); // 20 %
    expect(await pay(agentId, 2n * USDC, at(MINUTE))).toEqual([]); // 40 %
    expect(await pay(agentId, 2n * USDC, at(2 * MINUTE))).toHaveLength(1); // 60 %: crosses 50 %
    expect(await pay(agentId, 2n * USDC, at(3 * MINUTE))).toEqual([]); // 80 %: same period
    expect(await pay(agentId, 1n * USDC, at(4 * MINUTE))).toEqual([]); // 90 %
    // The period resets 24 h after its first payment; the next crossing fires again.
    expect(await pay(agentId, 3n * USDC, at(25 * HOUR))).toEqual([]); // 30 % of the new period
    expect(await pay(agentId, 3n * USDC, at(26 * HOUR))).toHaveLength(1); // 60 %

    const fired = await alertEvents(alert.id);
    expect(fired).toEqual([
      {
        event: "budget.warning",
        agentId,
        alertId: alert.id,
        thresholdPercent: 50,
        usedToday: { usdc: 6 },
        dailyBudget: { usdc: 10 },
        windowStart: at(0).toISOString(),
        resetsAt: at(24 * HOUR).toISOString(),
        detail: `50 % of the daily budget reached: used 6 usdc of 10 usdc; the window resets at ${at(24 * HOUR).toISOString()}`,
        timestamp: at(2 * MINUTE).toISOString(),
      },
      expect.objectContaining({ usedToday: { usdc: 6 }, windowStart: at(25 * HOUR).toISOString(), timestamp: at(26 * HOUR).toISOString() }),
    ]);

    // The gateway's own spec 3 warning (80 %) is a separate event, not the alert's.
    const { rows } = await suite.pool.query<{ payload: Record<string, unknown> }>(
      "SELECT payload FROM gateway_events WHERE agent_id = $1 AND alert_id IS NULL AND type = 'budget.warning'",
      [agentId],
    );
    expect(rows.map((row) => [row.payload.thresholdPercent, row.payload.usedToday])).toEqual([[80, { usdc: 8 }]]);

    // Both alert notifications reach the alert's webhook, signed with the alert's secret.
    await drain(dispatcher());
    expect(r.received.map((x) => JSON.parse(x.body) as unknown)).toEqual(fired);
    for (const request of r.received) verifyStandardWebhook(signingSecret!, request.headers, request.body);
  });

  it("a firing in a transaction that rolls back does not count: the next payment of the period fires", async () => {
    const { accountId, agentId } = await account();
    await putPolicy(suite.pool, agentId, { dailyBudgetUnits: 10n * USDC });
    const { alert } = await createAlert(
      suite.pool,
      suite.box,
      accountId,
      parseAlertOptions({ agent: agentId, type: "budget_pct", threshold: "92.5", notify: "email:ops@example.com" }),
    );
    expect(String(alert.threshold)).toBe("92.5");
    expect(await pay(agentId, 95n * (USDC / 10n), at(0), false)).toHaveLength(1); // rolled back
    expect(await alertEvents(alert.id)).toEqual([]);
    expect(await pay(agentId, 93n * (USDC / 10n), at(MINUTE))).toHaveLength(1);
    expect(await alertEvents(alert.id)).toHaveLength(1);
  });
});

describe("budget.warning (spec 3)", () => {
  it("reaches the endpoints subscribed to it when a payment takes the budget to 80 %, once per period; other endpoints get nothing", async () => {
    const { accountId, agentId } = await account();
    await putPolicy(suite.pool, agentId, { dailyBudgetUnits: 10n * USDC });
    const [subscribed, other, deleted] = [await receiver(), await receiver(), await receiver()];
    const { secret } = await suite.endpoint(accountId, { url: subscribed.url, eventTypes: ["budget.warning"] });
    await suite.endpoint(accountId, { url: other.url, eventTypes: ["policy.violation"] });
    const gone = await suite.endpoint(accountId, { url: deleted.url });
    expect(await deleteWebhookEndpoint(suite.pool, accountId, gone.endpoint.id)).toBe(true);

    await pay(agentId, 7n * USDC, at(0)); // 70 %
    await pay(agentId, 1n * USDC, at(MINUTE)); // 80 %: warning
    await pay(agentId, 1n * USDC, at(2 * MINUTE)); // 90 %: still the same period
    await drain(dispatcher());

    expect(other.received).toEqual([]);
    expect(deleted.received).toEqual([]);
    expect(subscribed.received).toHaveLength(1);
    verifyStandardWebhook(secret, subscribed.received[0]!.headers, subscribed.received[0]!.body);
    expect(JSON.parse(subscribed.received[0]!.body)).toEqual({
      event: "budget.warning",
      agentId,
      alertId: null,
      thresholdPercent: 80,
      usedToday: { usdc: 8 },
      dailyBudget: { usdc: 10 },
      windowStart: at(0).toISOString(),
      resetsAt: at(24 * HOUR).toISOString(),
      detail: `80 % of the daily budget reached: used 8 usdc of 10 usdc; the window resets at ${at(24 * HOUR).toISOString()}`,
      timestamp: at(MINUTE).toISOString(),
    });
  });
});

describe("event payload money", () => {
  it("is written as the exact decimal of the base units, never through a float (a webhook body keeps all 18 digits)", async () => {
    const { accountId, agentId } = await account();
    // 123456789012.345678 usdc and 111111111111.111111 usdc: 18 significant digits, more than a
    // double holds, so a Number() on the way would print them rounded.
    await putPolicy(suite.pool, agentId, { dailyBudgetUnits: 123_456_789_012_345_678n });
    const r = await receiver();
    await suite.endpoint(accountId, { url: r.url, eventTypes: ["budget.warning"] });
    await pay(agentId, 111_111_111_111_111_111n, at(0)); // 90 %: the warning
    await drain(dispatcher());
    expect(r.received).toHaveLength(1);
    const body = r.received[0]!.body;
    expect(body).toContain('"usedToday":{"usdc":111111111111.111111}');
    expect(body).toContain('"dailyBudget":{"usdc":123456789012.345678}');
    expect(body).toContain('"thresholdPercent":80,');
    const { rows } = await suite.pool.query<{ text: string }>("SELECT payload::text AS text FROM gateway_events WHERE agent_id = $1", [
      agentId,
    ]);
    expect(rows.map((row) => row.text)).toEqual([body]);
  });
});

describe("spend_rate", () => {
  it("fires when the amount spent within its window exceeds the threshold, at most once per window", async () => {
    const { accountId, agentId } = await account();
    const r = await receiver();
    const { alert } = await createAlert(
      suite.pool,
      suite.box,
      accountId,
      parseAlertOptions({ agent: agentId, type: "spend_rate", threshold: 5, window: "1h", notify: `webhook:${r.url}` }),
    );
    expect(await pay(agentId, 2n * USDC, at(0))).toEqual([]);
    expect(await pay(agentId, 2n * USDC, at(10 * MINUTE))).toEqual([]); // 4 within the hour
    expect(await pay(agentId, 2n * USDC, at(20 * MINUTE))).toHaveLength(1); // 6 > 5
    expect(await pay(agentId, 1n * USDC, at(30 * MINUTE))).toEqual([]); // 7, but fired within the hour
    expect(await pay(agentId, 1n * USDC, at(75 * MINUTE))).toEqual([]); // (15m, 75m]: 2 + 1 + 1 = 4
    expect(await pay(agentId, 3n * USDC, at(90 * MINUTE))).toEqual([]); // (30m, 90m]: 1 + 3 = 4
    expect(await pay(agentId, 6n * USDC, at(140 * MINUTE))).toHaveLength(1); // (80m, 140m]: 3 + 6 = 9

    const fired = await alertEvents(alert.id);
    expect(fired.map((p) => p.spent)).toEqual([{ usdc: 6 }, { usdc: 9 }]);
    expect(fired[0]).toEqual({
      event: "spend_rate.exceeded",
      agentId,
      alertId: alert.id,
      window: "1h",
      threshold: { usdc: 5 },
      spent: { usdc: 6 },
      detail: "spent 6 usdc within 1h, above the alert threshold of 5 usdc",
      timestamp: at(20 * MINUTE).toISOString(),
    });
    await drain(dispatcher());
    expect(r.received).toHaveLength(2);
  });
});

describe("policy_violation", () => {
  it("fires on every rejection, delivering the spec 6 policy.violation payload (same event as the endpoints get)", async () => {
    const { accountId, agentId } = await account();
    await putPolicy(suite.pool, agentId, { perCallLimitUnits: 1n * USDC });
    const [alertReceiver, endpointReceiver] = [await receiver(), await receiver()];
    await suite.endpoint(accountId, { url: endpointReceiver.url, eventTypes: ["policy.violation"] });
    const { alert } = await createAlert(
      suite.pool,
      suite.box,
      accountId,
      parseAlertOptions({ agent: agentId, type: "policy_violation", notify: `webhook:${alertReceiver.url}` }),
    );
    expect(await pay(agentId, USDC / 2n, at(0))).toEqual([]); // allowed: nothing
    const [first] = await pay(agentId, 15n * (USDC / 10n), at(MINUTE));
    const [second] = await pay(agentId, 2n * USDC, at(2 * MINUTE));
    expect(first).toBeDefined();
    expect(second).not.toBe(first);

    await drain(dispatcher());
    const expected = {
      event: "policy.violation",
      agentId,
      reason: "per_call_limit_exceeded",
      detail: "per_call_limit_exceeded: requested 1.5 usdc, limit is 1 usdc",
      endpoint: ENDPOINT,
      timestamp: at(MINUTE).toISOString(),
    };
    for (const r of [alertReceiver, endpointReceiver]) {
      expect(r.received.map((x) => x.headers["webhook-id"])).toEqual([first, second]);
      expect(Object.keys(JSON.parse(r.received[0]!.body) as object)).toEqual([
        "event",
        "agentId",
        "reason",
        "detail",
        "endpoint",
        "timestamp",
      ]);
      expect(JSON.parse(r.received[0]!.body)).toEqual(expected);
    }
    expect(await getAlert(suite.pool, accountId, alert.id)).toMatchObject({ type: "policy_violation", threshold: null, window: null });
  });

  it("an e-mail alert arrives at the SMTP server with the expected subject and body", async () => {
    const { mails, smtp, mailer } = await smtpSink();
    try {
      const { accountId, agentId } = await account();
      await putPolicy(suite.pool, agentId, { perCallLimitUnits: 1n * USDC });
      const created = await createAlert(
        suite.pool,
        suite.box,
        accountId,
        parseAlertOptions({ agent: agentId, type: "policy_violation", notify: "email:ops@example.com" }),
      );
      expect(created.signingSecret).toBeNull();
      const [eventId] = await pay(agentId, 3n * USDC, at(0));
      await drain(dispatcher(mailer));

      expect(mails).toHaveLength(1);
      expect(mails[0]!.to).toEqual(["ops@example.com"]);
      const { headers, body } = parseMail(mails[0]!.raw);
      expect(headers.subject).toBe(`[Agent Payment Gateway] policy.violation: agent ${agentId} rejected (per_call_limit_exceeded)`);
      expect(headers["message-id"]).toBe(`<${eventId}@agent-payment-gateway.invalid>`);
      expect(headers.from).toBe("Gateway <alerts@gateway.test>");
      expect(body).toContain("per_call_limit_exceeded: requested 3 usdc, limit is 1 usdc");
      expect(body).toContain(`Agent: ${agentId}`);
      expect(body).toContain(`Event id: ${eventId}`);
      expect(body).toContain(`"endpoint": "${ENDPOINT}"`);
      const { rows } = await suite.pool.query("SELECT status, attempts FROM event_deliveries WHERE event_id = $1", [eventId]);
      expect(rows).toEqual([{ status: "delivered", attempts: 1 }]);
    } finally {
      mailer.close();
      await new Promise<void>((done) => smtp.close(() => done()));
    }
  });
});

/** A payment the policy holds for a person: reserved `pending_approval`, approval recorded, event emitted. */
async function hold(accountId: string, agentId: string, amountUnits: bigint, when: Date, commit = true): Promise<{ approvalId: string }> {
  return suite.transaction(
    async (client) => {
      const held = await reserveOrHoldInTransaction(client, agentId, { endpoint: ENDPOINT, amountUnits }, when);
      if (held.decision.decision !== "needs_approval" || held.reservationId === null)
        throw new Error(`not held: ${held.decision.decision}`);
      const approval = await holdPayment(
        client,
        { box: suite.box, publicUrl: "https://gateway.test" },
        {
          accountId,
          agentKey: agentId,
          reservationId: held.reservationId,
          idempotencyKey: null,
          amountUnits,
          endpoint: ENDPOINT,
          decision: held.decision,
          now: when,
          policyVersion: held.policyVersion,
        },
      );
      return { approvalId: approval.id };
    },
    { commit },
  );
}

const APPROVAL_ABOVE_5 = {
  approval: { aboveUnits: 5n * USDC, domains: [], firstPaymentToDomain: false, timeoutMs: 15 * MINUTE, onTimeout: "deny" as const },
};

describe("approval_requested", () => {
  it("a held payment's approval.requested reaches the rule's e-mail (detail and decide link) and Slack targets; another agent's rule gets nothing", async () => {
    const { mails, smtp, mailer } = await smtpSink();
    try {
      const { accountId, agentId } = await account();
      const other = await account();
      await putPolicy(suite.pool, agentId, APPROVAL_ABOVE_5);
      await putPolicy(suite.pool, other.agentId, APPROVAL_ABOVE_5);
      const [slack, otherSlack] = [await receiver(), await receiver()];
      const rule = (agent: string, notify: string) => parseAlertOptions({ agent, type: "approval_requested", notify });
      const mailRule = await createAlert(suite.pool, suite.box, accountId, rule(agentId, "email:approver@example.com"));
      const slackRule = await createAlert(suite.pool, suite.box, accountId, rule(agentId, `webhook:${slack.url}`));
      await createAlert(suite.pool, suite.box, other.accountId, rule(other.agentId, `webhook:${otherSlack.url}`));
      await createAlert(suite.pool, suite.box, other.accountId, rule(other.agentId, "email:other@example.com"));
      expect(mailRule.alert).toMatchObject({ type: "approval_requested", threshold: null, window: null });
      expect(slackRule.signingSecret).toMatch(/^whsec_/);

      // An allowed payment (below the approval threshold) notifies no approval rule.
      expect(await pay(agentId, 1n * USDC, at(0))).toEqual([]);
      const { approvalId } = await hold(accountId, agentId, 6n * USDC, at(MINUTE));

      const { rows: events } = await suite.pool.query<{ id: string; payload: Record<string, unknown> }>(
        "SELECT id, payload FROM gateway_events WHERE account_id = $1 AND type = 'approval.requested'",
        [accountId],
      );
      expect(events).toHaveLength(1);
      const [event] = events;
      const link = event!.payload.decideUrl as string;
      expect(link).toMatch(new RegExp(`^https://gateway\\.test/v1/approvals/${approvalId}/decide\\?token=.+`));
      // Both deliveries were written with the hold, in its transaction, before any dispatcher ran.
      const { rows: queued } = await suite.pool.query<{ channel: string; alert_id: string }>(
        "SELECT channel, alert_id FROM event_deliveries WHERE event_id = $1 ORDER BY channel",
        [event!.id],
      );
      expect(queued).toEqual([
        { channel: "email", alert_id: mailRule.alert.id },
        { channel: "webhook", alert_id: slackRule.alert.id },
      ]);

      // hooks.slack.com cannot be reached from a test: treat the loopback host as Slack's.
      await drain(dispatcher(mailer, ["127.0.0.1"]));

      expect(mails).toHaveLength(1);
      expect(mails[0]!.to).toEqual(["approver@example.com"]);
      const { headers, body } = parseMail(mails[0]!.raw);
      expect(headers.subject).toContain(`approval.requested: agent ${agentId} asks to pay 6 usdc to api.example.com`);
      expect(headers["message-id"]).toBe(`<${event!.id}@agent-payment-gateway.invalid>`);
      expect(body).toContain(event!.payload.detail as string);
      expect(body).toContain(`Approve or deny: ${link}`);

      expect(slack.received).toHaveLength(1);
      const text = (JSON.parse(slack.received[0]!.body) as { text: string }).text;
      expect(text).toContain(link);
      expect(text).toContain(event!.payload.detail as string);
      verifyStandardWebhook(slackRule.signingSecret!, slack.received[0]!.headers, slack.received[0]!.body);
      expect(otherSlack.received).toEqual([]);
    } finally {
      mailer.close();
      await new Promise<void>((done) => smtp.close(() => done()));
    }
  });

  it("a plain webhook target gets the signed approval.requested body; a hold that rolls back delivers nothing", async () => {
    const { accountId, agentId } = await account();
    await putPolicy(suite.pool, agentId, APPROVAL_ABOVE_5);
    const r = await receiver();
    const { signingSecret } = await createAlert(
      suite.pool,
      suite.box,
      accountId,
      parseAlertOptions({ agent: agentId, type: "approval_requested", notify: `webhook:${r.url}` }),
    );
    const rolledBack = await hold(accountId, agentId, 8n * USDC, at(0), false);
    const { approvalId } = await hold(accountId, agentId, 7n * USDC, at(MINUTE));
    expect(approvalId).not.toBe(rolledBack.approvalId);
    await drain(dispatcher());
    expect(r.received).toHaveLength(1);
    verifyStandardWebhook(signingSecret!, r.received[0]!.headers, r.received[0]!.body);
    expect(JSON.parse(r.received[0]!.body)).toMatchObject({
      event: "approval.requested",
      approvalId,
      agentId,
      amount: { usdc: 7 },
      decideUrl: expect.stringContaining(`/v1/approvals/${approvalId}/decide?token=`),
    });
  });
});

describe("alert rules", () => {
  it("are validated, listed per account and deleted; a deleted rule no longer fires", async () => {
    const { accountId, agentId } = await account();
    const bad = (options: Parameters<typeof parseAlertOptions>[0]) => () => parseAlertOptions(options);
    expect(bad({ agent: agentId, type: "budget_pct", notify: "email:a@b.example" })).toThrow(InvalidAlertError);
    expect(bad({ agent: agentId, type: "budget_pct", threshold: 101, notify: "email:a@b.example" })).toThrow(/at most 100/);
    expect(bad({ agent: agentId, type: "spend_rate", threshold: 5, notify: "email:a@b.example" })).toThrow(/--window/);
    expect(bad({ agent: agentId, type: "spend_rate", threshold: 5, window: "1y", notify: "email:a@b.example" })).toThrow(/--window/);
    expect(bad({ agent: agentId, type: "spend_rate", threshold: 0.0000001, window: "1h", notify: "email:a@b.example" })).toThrow(
      /threshold/,
    );
    expect(bad({ agent: agentId, type: "policy_violation", notify: "sms:+15550100" })).toThrow(/--notify/);
    expect(bad({ agent: agentId, type: "policy_violation", notify: "webhook:ftp://x.example" })).toThrow(/--notify/);
    expect(bad({ agent: agentId, type: "policy_violation", notify: "email:a@b.example\r\nBcc: x@y.example" })).toThrow(/--notify/);
    expect(bad({ agent: agentId, type: "volume", notify: "email:a@b.example" })).toThrow(/--type/);
    expect(bad({ agent: agentId, type: "approval_requested", threshold: 5, notify: "email:a@b.example" })).toThrow(InvalidAlertError);
    expect(bad({ agent: agentId, type: "approval_requested", window: "1h", notify: "email:a@b.example" })).toThrow(
      /no --threshold or --window/,
    );

    const other = await account();
    const foreign = parseAlertOptions({ agent: other.agentId, type: "policy_violation", notify: "email:a@b.example" });
    await expect(createAlert(suite.pool, suite.box, accountId, foreign)).rejects.toThrow(/no agent/);

    const rule = parseAlertOptions({
      agent: agentId,
      type: "spend_rate",
      threshold: "0.5",
      window: "15m",
      notify: "webhook:https://hooks.slack.com/services/T/B/X",
    });
    const created = await createAlert(suite.pool, suite.box, accountId, rule);
    expect(created.signingSecret).toMatch(/^whsec_/);
    expect(created.alert).toMatchObject({ type: "spend_rate", thresholdUnits: 500_000n, window: "15m", windowMs: 15 * MINUTE });
    expect(String(created.alert.threshold)).toBe("0.5");
    expect((await listAlerts(suite.pool, accountId)).map((a) => a.id)).toEqual([created.alert.id]);
    expect(await listAlerts(suite.pool, other.accountId)).toEqual([]);
    expect(await deleteAlert(suite.pool, other.accountId, created.alert.id)).toBe(false);
    expect(await deleteAlert(suite.pool, accountId, created.alert.id)).toBe(true);
    expect(await listAlerts(suite.pool, accountId)).toEqual([]);
    expect(await pay(agentId, 1n * USDC, at(0))).toEqual([]);
  });
});

/** Headers (lower-cased, unfolded) and the text body, quoted-printable decoded when so encoded. */
function parseMail(raw: string): { headers: Record<string, string>; body: string } {
  const split = raw.indexOf("\r\n\r\n");
  const headers: Record<string, string> = {};
  for (const line of raw
    .slice(0, split)
    .replace(/\r\n[ \t]+/g, " ")
    .split("\r\n")) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = raw.slice(split + 4);
  if (/quoted-printable/i.test(headers["content-transfer-encoding"] ?? "")) {
    body = body.replace(/=\r\n/g, "").replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
  return { headers, body: body.replace(/\r\n/g, "\n") };
}
