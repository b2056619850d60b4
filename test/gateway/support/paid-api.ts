/**
 * A third-party paid API for the protocol tests: real HTTP on loopback (node:http) that answers
 * 402 with the spec's x402 body (2.7) under `/x402/…` and the spec's MPP body (2.9) under
 * `/mpp/…`, takes MPP submissions at `POST /mpp/pay`, and serves the retried request once paid.
 * It is a test fixture playing someone else's server (the model for the SDK middleware), not a
 * stand-in for any of our components: verification and settlement are the real facilitator and
 * MPP service.
 *
 * Answers beyond the spec, documented in docs/protocols.md: a paid x402 answer carries
 * `X-PAYMENT-RESPONSE` (base64 JSON `{success, transaction, network, payer}`, as x402 v1 does);
 * a refused payment is a 402 with the same body and the refusal code in `X-PAYMENT-ERROR` /
 * `X-MPP-Error`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  MppFormatError,
  MppPaymentError,
  type MppPaymentRequest,
  MppSessionError,
  type MppService,
  mppRequestBody,
  MPP_PROTOCOL,
  parseMppSubmission,
  X_MPP_SESSION,
} from "../../../api/gateway/mpp/index.js";
import {
  decodePaymentHeaders,
  hasPaymentHeaders,
  type PaymentRequirement,
  requirementBody,
  X402FormatError,
  type X402Facilitator,
} from "../../../api/gateway/x402/index.js";

export const X_PAYMENT_RESPONSE = "X-PAYMENT-RESPONSE";
export const X_PAYMENT_ERROR = "X-PAYMENT-ERROR";
export const X_MPP_ERROR = "X-MPP-Error";
export const MPP_PAY_PATH = "/mpp/pay";
const MAX_BODY_BYTES = 16_384;

export interface X402Route {
  readonly facilitator: X402Facilitator;
  /** The requirement without its resource (each path is its own resource). */
  readonly terms: Omit<PaymentRequirement, "resource">;
}

export interface MppRoute {
  readonly service: MppService;
  readonly amountUnits: bigint;
  readonly paymentMethods: readonly string[];
  readonly sessionSupported: boolean;
}

export interface PaidApiCounters {
  x402Challenges: number;
  mppChallenges: number;
  mppSubmissions: number;
  served: number;
}

export interface PaidApi {
  readonly origin: string;
  readonly counters: PaidApiCounters;
  mppRequest(): MppPaymentRequest;
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", "cache-control": status === 402 ? "no-store" : "private", ...headers });
  res.end(JSON.stringify(body));
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new MppFormatError("malformed_submission", "body", "too large");
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new MppFormatError("malformed_submission", "body", "not JSON");
  }
}

export interface PaidApiRoutes {
  readonly x402?: X402Route;
  readonly mpp?: MppRoute;
}

/** Listens first, then builds the routes for the origin it got (an MPP service is scoped to it). */
export async function startPaidApi(makeRoutes: (origin: string) => PaidApiRoutes): Promise<PaidApi> {
  let routes: PaidApiRoutes = {};
  const counters: PaidApiCounters = { x402Challenges: 0, mppChallenges: 0, mppSubmissions: 0, served: 0 };
  let origin = "";
  const mppRequest = (): MppPaymentRequest => {
    const mpp = routes.mpp!;
    return {
      protocol: MPP_PROTOCOL,
      amountUnits: mpp.amountUnits,
      currency: "USDC",
      paymentMethods: mpp.paymentMethods,
      sessionSupported: mpp.sessionSupported,
      paymentEndpoint: `${origin}${MPP_PAY_PATH}`,
    };
  };

  async function x402(req: IncomingMessage, res: ServerResponse, route: X402Route, resource: string): Promise<void> {
    const requirement: PaymentRequirement = { ...route.terms, resource };
    if (!hasPaymentHeaders(req.headers)) {
      counters.x402Challenges += 1;
      return send(res, 402, requirementBody(requirement));
    }
    let payload;
    try {
      payload = decodePaymentHeaders(req.headers);
    } catch (error) {
      if (error instanceof X402FormatError) return send(res, 400, { error: error.reason, field: error.field });
      throw error;
    }
    const outcome = await route.facilitator.settle(payload, requirement);
    if (!outcome.ok) return send(res, 402, requirementBody(requirement), { [X_PAYMENT_ERROR]: outcome.reason });
    counters.served += 1;
    const receipt = { success: true, transaction: outcome.txHash, network: outcome.network, payer: outcome.payer };
    send(
      res,
      200,
      { data: `paid content of ${new URL(resource).pathname}` },
      {
        [X_PAYMENT_RESPONSE]: Buffer.from(JSON.stringify(receipt)).toString("base64"),
      },
    );
  }

  async function mppResource(req: IncomingMessage, res: ServerResponse, route: MppRoute, resource: string): Promise<void> {
    const token = req.headers[X_MPP_SESSION.toLowerCase()];
    if (typeof token !== "string") {
      counters.mppChallenges += 1;
      return send(res, 402, mppRequestBody(mppRequest()));
    }
    try {
      const use = await route.service.useSession(token, { endpoint: resource, amountUnits: route.amountUnits });
      counters.served += 1;
      send(
        res,
        200,
        { data: `paid content of ${new URL(resource).pathname}`, txHash: use.txHash, sessionId: use.sessionId },
        {
          [X_MPP_SESSION]: use.token,
        },
      );
    } catch (error) {
      if (!(error instanceof MppSessionError)) throw error;
      counters.mppChallenges += 1;
      send(res, 402, mppRequestBody(mppRequest()), { [X_MPP_ERROR]: error.reason });
    }
  }

  async function mppPay(req: IncomingMessage, res: ServerResponse, route: MppRoute): Promise<void> {
    counters.mppSubmissions += 1;
    try {
      const submission = parseMppSubmission(await readJson(req));
      const confirmation = await route.service.submitPayment(submission, mppRequest());
      send(
        res,
        200,
        {
          status: "confirmed",
          txHash: confirmation.txHash,
          method: confirmation.method,
          rail: confirmation.rail,
          sessionId: confirmation.session.sessionId,
          sessionExpiresAt: confirmation.session.expiresAt.toISOString(),
        },
        { [X_MPP_SESSION]: confirmation.session.token },
      );
    } catch (error) {
      if (error instanceof MppFormatError) return send(res, 400, { error: error.reason, field: error.field });
      if (error instanceof MppPaymentError)
        return send(res, 402, { error: error.reason, detail: error.message }, { [X_MPP_ERROR]: error.reason });
      throw error;
    }
  }

  const server: Server = createServer((req, res) => {
    const resource = `${origin}${req.url ?? "/"}`;
    const path = new URL(resource).pathname;
    const handled =
      path === MPP_PAY_PATH && req.method === "POST" && routes.mpp !== undefined
        ? mppPay(req, res, routes.mpp)
        : path.startsWith("/x402/") && routes.x402 !== undefined
          ? x402(req, res, routes.x402, resource)
          : path.startsWith("/mpp/") && routes.mpp !== undefined
            ? mppResource(req, res, routes.mpp, resource)
            : Promise.resolve(send(res, 404, { error: "not_found" }));
    handled.catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, { error: "internal", detail: error instanceof Error ? error.message : String(error) });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  routes = makeRoutes(origin);
  return {
    origin,
    counters,
    mppRequest,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
