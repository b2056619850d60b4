/**
 * One webhook POST. Success is any 2xx within the timeout; redirects are not followed (a 3xx is a
 * failure, as Standard Webhooks advises); the response body is drained and ignored.
 *
 * Server-side request forgery: a webhook URL is the customer's, so by default a delivery never
 * connects to loopback, private, link-local, shared, multicast or reserved addresses. The check
 * runs on the addresses the connection actually uses (a guarded `lookup` for names, the literal
 * for IP URLs), so a name that resolves to a public address when registered and to an internal
 * one later (DNS rebinding) is refused too. `allowPrivateNetworks` lifts it (local setups, tests).
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from "node:dns";
import { type IncomingMessage, request as httpRequest, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import { BlockList, isIP } from "node:net";
import { retryAfterMs } from "./backoff.js";

export interface HttpOutcome {
  readonly ok: boolean;
  /** null when no response arrived (connection error, timeout, refused address). */
  readonly status: number | null;
  readonly error: string | null;
  /** From `Retry-After` on 429/503. */
  readonly retryAfterMs: number | null;
}

export interface PostOptions {
  readonly timeoutMs: number;
  /** Deliver to loopback and private addresses too (default false). */
  readonly allowPrivateNetworks?: boolean;
}

const USER_AGENT = "agent-payment-gateway-webhooks/1";

const NOT_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 3],
] as const) {
  NOT_PUBLIC.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  ["::", 127],
  ["64:ff9b::", 96],
  ["100::", 64],
  ["2001:db8::", 32],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const) {
  NOT_PUBLIC.addSubnet(network, prefix, "ipv6");
}

/** True for any address a customer's webhook must not reach (IPv4-mapped IPv6 judged as IPv4). */
export function isNonPublicAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped !== null) return NOT_PUBLIC.check(mapped[1]!, "ipv4");
  const family = isIP(address);
  if (family === 0) return true;
  return NOT_PUBLIC.check(address, family === 4 ? "ipv4" : "ipv6");
}

export class RefusedAddressError extends Error {
  override readonly name = "RefusedAddressError";
  readonly code = "ERR_WEBHOOK_ADDRESS_REFUSED";
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`refused: ${host} resolves to ${address}, not a public address`);
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** `dns.lookup` that fails when any address of the name is not public. */
function guardedLookup(hostname: string, options: LookupOneOptions | LookupAllOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error !== null) return callback(error, "");
    const refused = addresses.find((entry) => isNonPublicAddress(entry.address));
    if (refused !== undefined) return callback(new RefusedAddressError(hostname, refused.address), "");
    if (options.all === true) return callback(null, addresses);
    const first = addresses[0];
    if (first === undefined) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), "");
    callback(null, first.address, first.family);
  });
}

export function postWebhook(url: string, body: string, headers: Record<string, string>, options: PostOptions): Promise<HttpOutcome> {
  const failed = (error: string): HttpOutcome => ({ ok: false, status: null, error, retryAfterMs: null });
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return Promise.resolve(failed("the webhook URL does not parse"));
  }
  const literal = target.hostname.replace(/^\[|\]$/g, "");
  if (options.allowPrivateNetworks !== true && isIP(literal) !== 0 && isNonPublicAddress(literal)) {
    return Promise.resolve(failed(new RefusedAddressError(literal, literal).message));
  }
  const requestOptions: RequestOptions = {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body).toString(),
      "user-agent": USER_AGENT,
      ...headers,
    },
    ...(options.allowPrivateNetworks === true ? {} : { lookup: guardedLookup as RequestOptions["lookup"] }),
  };
  return new Promise<HttpOutcome>((resolve) => {
    let settled = false;
    const finish = (outcome: HttpOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const onResponse = (response: IncomingMessage): void => {
      response.resume();
      const status = response.statusCode ?? 0;
      const ok = status >= 200 && status < 300;
      const throttled = status === 429 || status === 503;
      const retryAfter = response.headers["retry-after"];
      finish({
        ok,
        status,
        error: ok ? null : `HTTP ${status}`,
        retryAfterMs: throttled ? retryAfterMs(typeof retryAfter === "string" ? retryAfter : null, new Date()) : null,
      });
    };
    const request = (target.protocol === "https:" ? httpsRequest : httpRequest)(target, requestOptions, onResponse);
    const timer = setTimeout(() => {
      finish(failed(`no response within ${options.timeoutMs} ms`));
      request.destroy();
    }, options.timeoutMs);
    request.on("error", (error) => finish(failed(describe(error))));
    request.end(body);
  });
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error instanceof RefusedAddressError) return error.message;
  const code = (error as Error & { code?: string }).code;
  return code === undefined || error.message.includes(code) ? error.message : `${error.message} (${code})`;
}
