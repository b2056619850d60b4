/**
 * The pure parts of webhook delivery: targets, secrets, signing input rules, message rendering.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { budgetWarningPayload, policyViolationPayload } from "../../api/gateway/webhooks/index.js";
import {
  generateSigningSecret,
  isSlackUrl,
  parseNotifyTarget,
  redactUrl,
  renderEmail,
  retryAfterMs,
  SecretBox,
  signedHeaders,
  signingKey,
  signWebhook,
  slackBody,
} from "../../api/gateway/webhooks/index.js";
import { verifyStandardWebhook } from "./support/webhook-receiver.js";

const AT = new Date("2026-03-01T12:00:00.000Z");
const violation = policyViolationPayload({
  agentId: "agent-1",
  reasonCode: "domain_blocked",
  reason: "domain_blocked: evil.example.com is blocked by the policy (blockedDomains entry evil.example.com)",
  endpoint: "https://evil.example.com/x",
  at: AT,
});

describe("notify targets", () => {
  it("accepts webhook:<http(s) url> and email:<address>, and nothing else", () => {
    expect(parseNotifyTarget("webhook:https://hooks.slack.com/services/T0/B0/xyz")).toEqual({
      channel: "webhook",
      destination: "https://hooks.slack.com/services/T0/B0/xyz",
    });
    expect(parseNotifyTarget("email:ops+alerts@example.co.uk")).toEqual({ channel: "email", destination: "ops+alerts@example.co.uk" });
    for (const bad of [
      "webhook:",
      "webhook:javascript:alert(1)",
      "webhook:https://user:pass@example.com/",
      "email:no-at-sign",
      "email:a@b.example\nBcc: x@y.example",
      "email:<a@b.example>",
      "email:a@b.example, c@d.example",
      "slack:#ops",
      "https://example.com",
    ]) {
      expect(() => parseNotifyTarget(bad), bad).toThrow();
    }
  });

  it("recognizes Slack by host only, and logs only a URL's origin", () => {
    expect(isSlackUrl("https://hooks.slack.com/services/T/B/secret")).toBe(true);
    expect(isSlackUrl("https://hooks.slack.com.evil.example/services")).toBe(false);
    expect(isSlackUrl("https://example.com/hooks.slack.com")).toBe(false);
    expect(redactUrl("https://hooks.slack.com/services/T/B/secret?x=1")).toBe("https://hooks.slack.com");
  });
});

describe("secrets", () => {
  it("whsec_ secrets hold 32 random bytes; keys outside 24..64 bytes are refused", () => {
    const secret = generateSigningSecret();
    expect(signingKey(secret)).toHaveLength(32);
    expect(generateSigningSecret()).not.toBe(secret);
    expect(() => signingKey(`whsec_${randomBytes(16).toString("base64")}`)).toThrow(/24 to 64/);
    expect(() => signingKey(randomBytes(32).toString("base64"))).toThrow(/whsec_/);
  });

  it("WEBHOOK_SECRETS_KEY is read as hex or base64 and required", () => {
    const key = randomBytes(32);
    const sealed = new SecretBox(key).encrypt("whsec_x");
    expect(SecretBox.fromEnv({ WEBHOOK_SECRETS_KEY: key.toString("hex") }).decrypt(sealed)).toBe("whsec_x");
    expect(SecretBox.fromEnv({ WEBHOOK_SECRETS_KEY: key.toString("base64") }).decrypt(sealed)).toBe("whsec_x");
    expect(() => SecretBox.fromEnv({})).toThrow(/WEBHOOK_SECRETS_KEY/);
    expect(() => SecretBox.fromEnv({ WEBHOOK_SECRETS_KEY: "short" })).toThrow(/32 bytes/);
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1]! ^= 1;
    expect(() => new SecretBox(key).decrypt(tampered)).toThrow();
  });
});

describe("signing", () => {
  it("signs the exact body with the attempt's timestamp; ids with '.' are refused", () => {
    const secret = generateSigningSecret();
    const body = JSON.stringify(violation);
    const headers = signedHeaders(secret, "evt_0123", AT, body);
    expect(headers["webhook-timestamp"]).toBe(String(AT.getTime() / 1000));
    expect(() => verifyStandardWebhook(secret, { ...headers }, body, AT.getTime() / 1000)).not.toThrow();
    expect(() => verifyStandardWebhook(secret, { ...headers }, `${body} `, AT.getTime() / 1000)).toThrow();
    expect(() => signWebhook(secret, "evt.1", 1, body)).toThrow(/'\.'/);
  });

  it("Retry-After is read as seconds or an HTTP date, capped at an hour", () => {
    expect(retryAfterMs("30", AT)).toBe(30_000);
    expect(retryAfterMs(new Date(AT.getTime() + 90_000).toUTCString(), AT)).toBe(90_000);
    expect(retryAfterMs("86400", AT)).toBe(3_600_000);
    expect(retryAfterMs("soon", AT)).toBeNull();
    expect(retryAfterMs(null, AT)).toBeNull();
  });
});

describe("rendering", () => {
  it("Slack gets { text } with the summary and the detail", () => {
    expect(JSON.parse(slackBody(violation))).toEqual({
      text: "*policy.violation: agent agent-1 rejected (domain_blocked)*\ndomain_blocked: evil.example.com is blocked by the policy (blockedDomains entry evil.example.com)\n2026-03-01T12:00:00.000Z",
    });
  });

  it("an e-mail's subject summarizes the event; its body carries detail, ids and the payload", () => {
    const warning = budgetWarningPayload({
      agentId: "agent-2",
      alertId: null,
      thresholdBp: 8000,
      usedUnits: 8_000_001n,
      limitUnits: 10_000_000n,
      windowStart: AT,
      resetsAt: new Date(AT.getTime() + 86_400_000),
      at: AT,
    });
    expect(String(warning.usedToday.usdc)).toBe("8.000001");
    const mail = renderEmail("evt_abc", "ops@example.com", warning);
    expect(mail.subject).toBe("[Agent Payment Gateway] budget.warning: agent agent-2 reached 80 % of its daily budget");
    expect(mail.messageId).toBe("<evt_abc@agent-payment-gateway.invalid>");
    expect(mail.text.split("\n").slice(0, 6)).toEqual([
      "80 % of the daily budget reached: used 8.000001 usdc of 10 usdc; the window resets at 2026-03-02T12:00:00.000Z",
      "",
      "Event: budget.warning",
      "Agent: agent-2",
      "Time: 2026-03-01T12:00:00.000Z",
      "Event id: evt_abc",
    ]);
    expect(mail.text).toContain('"dailyBudget": {\n    "usdc": 10\n  }');
  });
});
