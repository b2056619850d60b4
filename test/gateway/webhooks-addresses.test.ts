/**
 * The one address classification (api/gateway/webhooks/addresses.ts) over a table of spellings:
 * each is judged the same way as a raw literal, as the host of a webhook URL at registration (after
 * the URL parser's normalization) and at delivery, where a name resolving to it is refused before
 * any byte leaves. DNS is a stand-in resolver (we cannot make a real name resolve to these); the
 * receiver is real HTTP on loopback and must see nothing.
 */
import type { LookupAddress } from "node:dns";
import { isIP } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AddressClass,
  classifyAddress,
  postWebhook,
  type Resolver,
  refuseInternalWebhookUrl,
  WebhookTargetRefusedError,
} from "../../api/gateway/webhooks/index.js";
import { WebhookReceiver } from "./support/webhook-receiver.js";

const TABLE: ReadonlyArray<readonly [string, AddressClass]> = [
  // IPv4
  ["127.0.0.1", "loopback"],
  ["127.255.255.254", "loopback"],
  ["0.0.0.0", "unspecified"],
  ["0.1.2.3", "reserved"],
  ["10.0.0.1", "private"],
  ["172.16.0.1", "private"],
  ["172.31.255.255", "private"],
  ["192.168.0.1", "private"],
  ["100.64.0.1", "shared"],
  ["100.127.255.255", "shared"],
  ["169.254.169.254", "metadata"],
  ["169.254.0.1", "link_local"],
  ["192.0.0.8", "reserved"],
  ["192.0.2.1", "documentation"],
  ["198.51.100.7", "documentation"],
  ["203.0.113.9", "documentation"],
  ["198.18.0.1", "reserved"],
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["240.0.0.1", "reserved"],
  ["255.255.255.255", "reserved"],
  ["8.8.8.8", "public"],
  ["172.32.0.1", "public"],
  ["100.128.0.1", "public"],
  ["11.0.0.1", "public"],
  // IPv6 basics
  ["::", "unspecified"],
  ["0:0:0:0:0:0:0:0", "unspecified"],
  ["::1", "loopback"],
  ["0:0:0:0:0:0:0:1", "loopback"],
  ["0000:0000:0000:0000:0000:0000:0000:0001", "loopback"],
  ["fe80::1", "link_local"],
  ["FE80::1%eth0", "link_local"],
  ["febf:ffff::1", "link_local"],
  ["fec0::1", "reserved"],
  ["fc00::1", "unique_local"],
  ["fd12:3456:789a::1", "unique_local"],
  ["ff02::1", "multicast"],
  ["2001:db8::1", "documentation"],
  ["3fff::1", "documentation"],
  ["100::1", "reserved"],
  ["2001::1", "reserved"],
  ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved"],
  ["2001:10::1", "reserved"],
  ["4000::1", "reserved"],
  ["2606:4700:4700::1111", "public"],
  ["2a00:1450:4001:81b::200e", "public"],
  // IPv4-mapped, every spelling
  ["::ffff:127.0.0.1", "loopback"],
  ["::ffff:7f00:1", "loopback"],
  ["::FFFF:7F00:0001", "loopback"],
  ["0:0:0:0:0:ffff:127.0.0.1", "loopback"],
  ["0:0:0:0:0:ffff:7f00:1", "loopback"],
  ["::ffff:169.254.169.254", "metadata"],
  ["::ffff:a9fe:a9fe", "metadata"],
  ["::ffff:10.0.0.1", "private"],
  ["::ffff:a00:1", "private"],
  ["::ffff:c0a8:101", "private"],
  ["::ffff:0.0.0.0", "unspecified"],
  ["::ffff:8.8.8.8", "public"],
  ["::ffff:808:808", "public"],
  ["::ffff:0:127.0.0.1", "loopback"],
  ["::ffff:0:a00:1", "private"],
  // IPv4-compatible
  ["::127.0.0.1", "loopback"],
  ["::7f00:1", "loopback"],
  ["0:0:0:0:0:0:127.0.0.1", "loopback"],
  ["::a9fe:a9fe", "metadata"],
  ["::169.254.169.254", "metadata"],
  ["::a00:1", "private"],
  ["::10.0.0.1", "private"],
  ["::c0a8:1", "private"],
  ["::808:808", "reserved"],
  ["::8.8.8.8", "reserved"],
  // NAT64
  ["64:ff9b::127.0.0.1", "loopback"],
  ["64:ff9b::7f00:1", "loopback"],
  ["64:ff9b::a9fe:a9fe", "metadata"],
  ["64:ff9b::10.1.2.3", "private"],
  ["64:ff9b::8.8.8.8", "translated"],
  ["64:ff9b:1::a00:1", "private"],
  // 6to4
  ["2002:7f00:1::", "loopback"],
  ["2002:a9fe:a9fe::1", "metadata"],
  ["2002:a00:1::1", "private"],
  ["2002:c0a8:101:1::1", "private"],
  ["2002:808:808::1", "public"],
  // not addresses
  ["", "invalid"],
  ["localhost", "invalid"],
  ["1.2.3", "invalid"],
  ["::ffff:1.2.3.256", "invalid"],
  ["1::2::3", "invalid"],
];

describe("classifyAddress", () => {
  it("has a table of at least 60 spellings", () => {
    expect(TABLE.length).toBeGreaterThanOrEqual(60);
  });

  it.each(TABLE)("%s is %s", (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
    expect(classifyAddress(`[${address}]`)).toBe(expected);
  });

  it("registration judges every literal the same way, after the URL parser's normalization", () => {
    for (const [address, expected] of TABLE) {
      if (expected === "invalid" || address.includes("%")) continue;
      const url = new URL(isIP(address) === 6 ? `http://[${address}]:8080/hook` : `http://${address}:8080/hook`).toString();
      const outcome = (allowLoopback: boolean): string => {
        try {
          refuseInternalWebhookUrl(url, { allowLoopback });
          return "accepted";
        } catch (error) {
          expect(error).toBeInstanceOf(WebhookTargetRefusedError);
          return (error as WebhookTargetRefusedError).reason;
        }
      };
      const strict = expected === "public" ? "accepted" : expected === "loopback" ? "loopback" : "non_public_address";
      expect(outcome(false), url).toBe(strict);
      expect(outcome(true), url).toBe(expected === "public" || expected === "loopback" ? "accepted" : "non_public_address");
    }
  });
});

describe("delivery refuses a name resolving to a non-public address", () => {
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
  });

  afterAll(async () => {
    await receiver?.close();
  });

  /** Stand-in DNS: every name resolves to `addresses`. */
  const resolvingTo =
    (...addresses: string[]): Resolver =>
    (_hostname, callback) =>
      callback(
        null,
        addresses.map((address): LookupAddress => ({ address, family: isIP(address) })),
      );

  it("each non-public spelling (alone, or next to a public one) is refused before any byte leaves; the receiver sees nothing", async () => {
    const port = new URL(receiver.url).port;
    const before = receiver.received.length;
    const refused = TABLE.filter(([, kind]) => kind !== "public" && kind !== "invalid").map(([address]) => address.replace(/%.*$/, ""));
    for (const address of refused) {
      for (const resolve of [resolvingTo(address), resolvingTo("127.0.0.1", address), resolvingTo("8.8.8.8", address)]) {
        const outcome = await postWebhook(`http://receiver.example:${port}/hooks`, "{}", {}, { timeoutMs: 2_000, resolve });
        expect(outcome, address).toMatchObject({ ok: false, status: null });
        expect(outcome.error, address).toMatch(/not a public address/);
      }
    }
    expect(receiver.received.length).toBe(before);
  });

  it("the same stand-in resolver pointing at the receiver delivers when private networks are allowed (the guard, not the resolver, refused)", async () => {
    const port = new URL(receiver.url).port;
    const before = receiver.received.length;
    const outcome = await postWebhook(
      `http://receiver.example:${port}/hooks`,
      "{}",
      {},
      { timeoutMs: 2_000, resolve: resolvingTo("127.0.0.1"), allowPrivateNetworks: true },
    );
    expect(outcome.ok).toBe(true);
    expect(receiver.received.length).toBe(before + 1);
  });
});
