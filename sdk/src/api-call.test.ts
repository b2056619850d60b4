import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ApiUnreachableError, callApi } from "./api-call.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** A loopback server answering request i with replies[i] (the last repeats); counts requests. */
async function loopback(replies: Array<(res: ServerResponse) => void>): Promise<{ url: string; count: () => number; payments: string[] }> {
  let count = 0;
  const payments: string[] = [];
  const server = createServer((req, res) => {
    count += 1;
    if (typeof req.headers["x-payment"] === "string") payments.push(req.headers["x-payment"]);
    replies[Math.min(count - 1, replies.length - 1)]!(res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/r`, count: () => count, payments };
}

const answer = (status: number, body: unknown) => (res: ServerResponse) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};
const cut = (res: ServerResponse) => res.socket?.destroy();
const options = (retryServerErrors: boolean, signal?: AbortSignal) => ({
  fetch: (input: string | URL, init?: RequestInit) => fetch(input, init),
  timeoutMs: 5_000,
  retry: { maxRetries: 2, baseDelayMs: 1, maxDelayMs: 5 },
  retryServerErrors,
  signal,
});

describe("requests to the paid API", () => {
  it("the unpaid request passes a 5xx through without retrying it", async () => {
    const api = await loopback([answer(503, { busy: true }), answer(200, {})]);
    const result = await callApi({ url: api.url, method: "POST", headers: {}, body: "{}" }, options(false));
    expect(result.status).toBe(503);
    expect(result.data).toEqual({ busy: true });
    expect(api.count()).toBe(1);
  });

  it("the paid request is retried on 5xx with the same payment header", async () => {
    const api = await loopback([answer(502, {}), cut, answer(200, { ok: 1 })]);
    const result = await callApi({ url: api.url, method: "GET", headers: { "x-payment": "P1" } }, options(true));
    expect(result).toMatchObject({ status: 200, data: { ok: 1 } });
    expect(api.payments).toEqual(["P1", "P1", "P1"]);
  });

  it("a 4xx is returned at once even on the paid request", async () => {
    const api = await loopback([answer(402, { again: true })]);
    const result = await callApi({ url: api.url, method: "GET", headers: { "x-payment": "P" } }, options(true));
    expect(result.status).toBe(402);
    expect(api.count()).toBe(1);
  });

  it("no answer after every attempt is ApiUnreachableError with the cause", async () => {
    const api = await loopback([cut]);
    const error = await callApi({ url: api.url, method: "GET", headers: {} }, options(false)).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ApiUnreachableError);
    expect((error as ApiUnreachableError).attempts).toBe(3);
    expect(api.count()).toBe(3);
  });

  it("the caller's abort ends the call without retries", async () => {
    const controller = new AbortController();
    // The server never answers; the caller gives up once the request has arrived.
    const api = await loopback([() => controller.abort(new Error("stop"))]);
    await expect(callApi({ url: api.url, method: "GET", headers: {} }, options(true, controller.signal))).rejects.toThrow("stop");
    expect(api.count()).toBe(1);
  });

  it("a text body stays text", async () => {
    const api = await loopback([(res) => res.end("plain words")]);
    expect((await callApi({ url: api.url, method: "GET", headers: {} }, options(false))).data).toBe("plain words");
  });
});
