/**
 * Webhook URLs are the customer's: by default a delivery never reaches loopback, private or
 * otherwise non-public addresses, whether named by an IP literal or by a name that resolves there.
 * Real HTTP on loopback: the receiver must see nothing unless private networks are allowed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isNonPublicAddress, postWebhook } from "../../api/gateway/webhooks/index.js";
import { WebhookReceiver } from "./support/webhook-receiver.js";

let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
});

afterAll(async () => {
  await receiver?.close();
});

describe("webhook delivery and non-public addresses", () => {
  it.each([
    ["127.0.0.1", true],
    ["127.255.0.9", true],
    ["10.1.2.3", true],
    ["172.16.0.1", true],
    ["172.31.255.255", true],
    ["172.32.0.1", false],
    ["192.168.1.1", true],
    ["169.254.169.254", true],
    ["100.64.0.1", true],
    ["0.0.0.0", true],
    ["224.0.0.1", true],
    ["255.255.255.255", true],
    ["8.8.8.8", false],
    ["93.184.216.34", false],
    ["::1", true],
    ["::", true],
    ["fe80::1", true],
    ["fd00::1", true],
    ["::ffff:127.0.0.1", true],
    ["::ffff:8.8.8.8", false],
    ["2606:4700:4700::1111", false],
    ["not-an-address", true],
  ])("%s is non-public: %s", (address, expected) => {
    expect(isNonPublicAddress(address)).toBe(expected);
  });

  it("refuses a loopback IP literal, a name resolving to loopback, and an IPv6 loopback literal; the receiver sees nothing", async () => {
    const port = new URL(receiver.url).port;
    const before = receiver.received.length;
    for (const url of [receiver.url, `http://localhost:${port}/hooks`, `http://[::1]:${port}/hooks`]) {
      const outcome = await postWebhook(url, "{}", {}, { timeoutMs: 2_000 });
      expect(outcome).toMatchObject({ ok: false, status: null });
      expect(outcome.error).toMatch(/not a public address/);
    }
    expect(receiver.received.length).toBe(before);
  });

  it("delivers to the same receiver when private networks are allowed", async () => {
    const before = receiver.received.length;
    const outcome = await postWebhook(
      receiver.url,
      '{"ok":true}',
      { "webhook-id": "msg_ssrf" },
      { timeoutMs: 2_000, allowPrivateNetworks: true },
    );
    expect(outcome).toEqual({ ok: true, status: 200, error: null, retryAfterMs: null });
    expect(receiver.received.length).toBe(before + 1);
    expect(receiver.received.at(-1)!.headers["webhook-id"]).toBe("msg_ssrf");
  });
});
