/**
 * A third-party paid API on loopback that does what a resource server with our middleware does
 * (spec 4.3, 4.5): answers 402 with the spec 2.7 body, and on a retry carrying `X-PAYMENT` asks
 * the gateway's facilitator over real HTTP (`POST /v1/x402/settle`, its own API key, an
 * Idempotency-Key per payment) before serving the content. Unlike test/gateway/support/paid-api.ts
 * it does not hold an in-process facilitator: it is the shape of someone else's server.
 *
 * Prices are per request: `/x402/price/<units>/<anything>` costs `<units>` base units, so one
 * server can be paid many different amounts. A paid answer carries `X-PAYMENT-RESPONSE` (base64
 * JSON `{ success, transaction, network, payer }`); a refused payment is a 402 with the refusal in
 * `X-PAYMENT-ERROR`; a settlement whose outcome is not known yet is a 502 (the client retries).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  decodePaymentHeaders,
  hasPaymentHeaders,
  type PaymentRequirement,
  payloadBody,
  requirementBody,
  X402FormatError,
} from "../../../api/gateway/x402/index.js";
import { X_PAYMENT_ERROR, X_PAYMENT_RESPONSE } from "./paid-api.js";

const PRICE_PATH = /^\/x402\/price\/([1-9]\d{0,12})\/[A-Za-z0-9_-]{1,64}$/;

export interface FacilitatedApiOptions {
  /** `http://host:port` of the gateway (REST /v1). */
  readonly gatewayUrl: string;
  /** The resource server's own API key (spec 5.6: the facilitator needs the server's key). */
  readonly apiKey: string;
  /** The requirement without its amount and resource (both come from the path). */
  readonly terms: Omit<PaymentRequirement, "resource" | "amountUnits">;
  /** Sends an Idempotency-Key with each settle call (default true, as a careful middleware does). */
  readonly idempotentSettle?: boolean;
  /**
   * Settle calls in flight at most (default 16); the others queue here. A keyed settle holds a
   * Postgres connection of its own on the gateway for its whole run (api/shared/http/idempotency.ts), so
   * an unbounded burst of them exhausts the server's connections.
   */
  readonly maxConcurrentSettles?: number;
}

export interface SettleTiming {
  readonly txHash: string;
  /** Wall time of the `POST /v1/x402/settle` round trip, ms (queueing for a settle slot excluded). */
  readonly settle_ms: number;
}

export interface FacilitatedApi {
  readonly origin: string;
  /** One entry per successful settle call, in completion order. */
  readonly settlements: SettleTiming[];
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", "cache-control": status === 402 ? "no-store" : "private", ...headers });
  res.end(JSON.stringify(body));
}

export async function startFacilitatedApi(options: FacilitatedApiOptions): Promise<FacilitatedApi> {
  const settlements: SettleTiming[] = [];
  let origin = "";
  const limit = options.maxConcurrentSettles ?? 16;
  let inFlight = 0;
  const waiting: (() => void)[] = [];
  async function bounded<T>(work: () => Promise<T>): Promise<T> {
    while (inFlight >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    inFlight += 1;
    try {
      return await work();
    } finally {
      inFlight -= 1;
      waiting.shift()?.();
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const resource = `${origin}${req.url ?? "/"}`;
    const match = PRICE_PATH.exec(new URL(resource).pathname);
    if (match === null) return send(res, 404, { error: "not_found" });
    const requirement: PaymentRequirement = { ...options.terms, amountUnits: BigInt(match[1]!), resource };
    if (!hasPaymentHeaders(req.headers)) return send(res, 402, requirementBody(requirement));
    let payment;
    try {
      payment = decodePaymentHeaders(req.headers);
    } catch (error) {
      if (error instanceof X402FormatError) return send(res, 400, { error: error.reason, field: error.field });
      throw error;
    }
    const headers: Record<string, string> = { authorization: `Bearer ${options.apiKey}`, "content-type": "application/json" };
    if (options.idempotentSettle !== false) headers["idempotency-key"] = `settle:${payment.payload.from}:${payment.payload.nonce}`;
    const body = JSON.stringify({ payment: payloadBody(payment), requirement: requirementBody(requirement) });
    const { answer, outcome, settle_ms } = await bounded(async () => {
      const started = performance.now();
      const answer = await fetch(`${options.gatewayUrl}/v1/x402/settle`, { method: "POST", headers, body });
      const outcome = (await answer.json()) as { success?: boolean; txHash?: string; network?: string; payer?: string; reason?: string };
      return { answer, outcome, settle_ms: performance.now() - started };
    });
    if (answer.status === 200 && outcome.success === true && typeof outcome.txHash === "string") {
      settlements.push({ txHash: outcome.txHash, settle_ms });
      const receipt = { success: true, transaction: outcome.txHash, network: outcome.network, payer: outcome.payer };
      return send(
        res,
        200,
        { data: `paid content of ${new URL(resource).pathname}`, txHash: outcome.txHash },
        {
          [X_PAYMENT_RESPONSE]: Buffer.from(JSON.stringify(receipt)).toString("base64"),
        },
      );
    }
    if (answer.status === 200) return send(res, 402, requirementBody(requirement), { [X_PAYMENT_ERROR]: String(outcome.reason) });
    send(res, 502, { error: "settlement_unresolved", status: answer.status, detail: outcome });
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, { error: "internal", detail: error instanceof Error ? error.message : String(error) });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    settlements,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
