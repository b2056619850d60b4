/**
 * One x402 payment the way an agent pays through the gateway's REST /v1 (spec 4.7 `pay`), over
 * real HTTP: call the resource (402) → `POST /v1/agents/{id}/payments/authorize` with the 402 body
 * and its own Idempotency-Key → call the resource again with the returned `X-PAYMENT` headers (the
 * resource server settles through the facilitator) → `POST .../payments/{reservationId}/complete`
 * with the ledger transaction. Each step is timed for the benches.
 */
import { randomUUID } from "node:crypto";
import { X_PAYMENT_RESPONSE } from "./paid-api.js";

export interface GatewayClient {
  /** `http://host:port` of the gateway. */
  readonly gatewayUrl: string;
  readonly apiKey: string;
}

export interface StepTimings {
  readonly challenge_ms: number;
  readonly authorize_ms: number;
  /** The paid retry, the resource server's settle call included. */
  readonly paid_ms: number;
  readonly complete_ms: number;
}

export type PayOutcome =
  | {
      readonly kind: "paid";
      readonly reservationId: string;
      readonly txHash: string;
      /** The `complete` answer (200 `{ status: "settled" }` when the reservation now counts as settled). */
      readonly completeStatus: number;
      readonly completeBody: Record<string, unknown>;
      readonly timings: StepTimings;
    }
  /** The authorize answer was a problem (403 POLICY_VIOLATION, 400, …): nothing was paid. */
  | { readonly kind: "refused"; readonly status: number; readonly problem: Record<string, unknown>; readonly timings: Partial<StepTimings> }
  /** Authorized, but the resource server did not serve (refused or unresolved settlement). */
  | { readonly kind: "unpaid"; readonly reservationId: string; readonly status: number; readonly body: string };

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const result = await work();
  return [result, performance.now() - started];
}

async function post(
  client: GatewayClient,
  path: string,
  body: unknown,
  idempotencyKey: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${client.gatewayUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${client.apiKey}`, "content-type": "application/json", "idempotency-key": idempotencyKey },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export async function payThroughGateway(client: GatewayClient, agentId: string, url: string): Promise<PayOutcome> {
  const agentPath = `/v1/agents/${encodeURIComponent(agentId)}/payments`;
  const [challenge, challenge_ms] = await timed(async () => {
    const response = await fetch(url);
    return { status: response.status, body: (await response.json()) as unknown };
  });
  if (challenge.status !== 402) throw new Error(`expected 402 from ${url}, got ${challenge.status}`);

  const [authorized, authorize_ms] = await timed(() =>
    post(client, `${agentPath}/authorize`, { endpoint: url, x402: challenge.body }, randomUUID()),
  );
  if (authorized.status !== 200) {
    return { kind: "refused", status: authorized.status, problem: authorized.body, timings: { challenge_ms, authorize_ms } };
  }
  const reservationId = String(authorized.body.reservationId);
  const headers = authorized.body.headers as Record<string, string>;

  const [paid, paid_ms] = await timed(async () => {
    const response = await fetch(url, { headers });
    return { status: response.status, receipt: response.headers.get(X_PAYMENT_RESPONSE), body: await response.text() };
  });
  if (paid.status !== 200 || paid.receipt === null) return { kind: "unpaid", reservationId, status: paid.status, body: paid.body };
  const txHash = (JSON.parse(Buffer.from(paid.receipt, "base64").toString("utf8")) as { transaction: string }).transaction;

  const [completed, complete_ms] = await timed(() => post(client, `${agentPath}/${reservationId}/complete`, { txHash }, randomUUID()));
  return {
    kind: "paid",
    reservationId,
    txHash,
    completeStatus: completed.status,
    completeBody: completed.body,
    timings: { challenge_ms, authorize_ms, paid_ms, complete_ms },
  };
}
