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
import { isIP } from "node:net";
import { isNonPublicAddress } from "./addresses.js";
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
  /** Resolves a name to all its addresses; `dns.lookup` unless given (tests pass a stand-in DNS). */
  readonly resolve?: Resolver;
}

export type Resolver = (hostname: string, callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

const systemResolver: Resolver = (hostname, callback) => dnsLookup(hostname, { all: true }, callback);

const USER_AGENT = "agent-payment-gateway-webhooks/1";

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

/**
 * A `lookup` for the connection that fails when any address of the name is not public: the
 * connection only ever uses addresses this returned, so the check is on what is connected to.
 */
const guardedLookup =
  (resolve: Resolver, guard: boolean) =>
  (hostname: string, options: LookupOneOptions | LookupAllOptions, callback: LookupCallback): void =>
    resolve(hostname, (error, resolved) => {
      if (error !== null) return callback(error, "");
      // Any internal address refuses the name, even one of a family this connection would not use.
      const refused = guard ? resolved.find((entry) => isNonPublicAddress(entry.address)) : undefined;
      if (refused !== undefined) return callback(new RefusedAddressError(hostname, refused.address), "");
      const addresses = resolved.filter((entry) => options.family === undefined || options.family === 0 || entry.family === options.family);
      if (options.all === true) return callback(null, addresses);
      const first = addresses[0];
      if (first === undefined) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), "");
      callback(null, first.address, first.family);
    });

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
    lookup: guardedLookup(options.resolve ?? systemResolver, options.allowPrivateNetworks !== true) as RequestOptions["lookup"],
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
