/**
 * The paying side of the handshakes, as the tests drive it over real HTTP: what the SDK's `pay`
 * will do after its policy check (spec 4.7 steps 1, 2, 4, 5), reduced to the protocol steps.
 */
import { chooseMethod, parseMppPaymentRequest, signMppSubmission, submissionBody, X_MPP_SESSION } from "../../../api/gateway/mpp/index.js";
import { encodePaymentHeaders, type PaymentPayload, parsePaymentRequirement, signPaymentPayload } from "../../../api/gateway/x402/index.js";
import type { AgentSigner } from "../../../api/gateway/chain/index.js";
// The SDK's session memory, the one a real paying agent uses (spec 4.7 step 4).
import type { MppSessions } from "../../../sdk/src/sessions.js";
import { X_PAYMENT_RESPONSE } from "./paid-api.js";

export interface Paid {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly headers: Headers;
}

export interface X402Paid extends Paid {
  readonly payload: PaymentPayload;
  /** The ledger transaction from `X-PAYMENT-RESPONSE`, when paid. */
  readonly txHash: string | null;
}

export async function payX402(url: string, signer: AgentSigner, sign = signPaymentPayload): Promise<X402Paid> {
  const first = await fetch(url);
  if (first.status !== 402) throw new Error(`expected 402, got ${first.status}`);
  const requirement = parsePaymentRequirement(await first.json());
  const payload = await sign(signer, requirement);
  return retryX402(url, payload);
}

/** Sends the original request again with the payment headers of `payload`. */
export async function retryX402(url: string, payload: PaymentPayload): Promise<X402Paid> {
  const paid = await fetch(url, { headers: encodePaymentHeaders(payload) });
  const receipt = paid.headers.get(X_PAYMENT_RESPONSE);
  const txHash =
    receipt === null ? null : (JSON.parse(Buffer.from(receipt, "base64").toString("utf8")) as { transaction: string }).transaction;
  return { status: paid.status, body: (await paid.json()) as Record<string, unknown>, headers: paid.headers, payload, txHash };
}

export interface MppPaid extends Paid {
  /** True when this call went through 402 + submission; false when a session paid it. */
  readonly negotiated: boolean;
  readonly txHash: string;
  readonly sessionId: string;
}

/**
 * Spec 4.4 / 4.7 step 4: reuse the agent's session for the service when there is one; on a 402
 * (no session, or the service refused the token) negotiate on the default rail and keep the
 * token the answer carries (a refreshed one replaces the old).
 */
export async function payMpp(
  url: string,
  agentId: string,
  signer: AgentSigner,
  sessions: MppSessions,
  now: () => Date = () => new Date(),
): Promise<MppPaid> {
  const origin = new URL(url).origin;
  const cached = sessions.get(agentId, origin);
  let challenge: Response | null = null;
  if (cached !== undefined) {
    const reused = await fetch(url, { headers: { [X_MPP_SESSION]: cached.token } });
    if (reused.status === 200) return finish(reused, agentId, origin, sessions, cached.amountUnits, false, true);
    sessions.forget(agentId, origin);
    challenge = reused;
  }
  challenge ??= await fetch(url);
  if (challenge.status !== 402) throw new Error(`expected 402, got ${challenge.status}`);
  const request = parseMppPaymentRequest(await challenge.json());
  const method = chooseMethod(request.paymentMethods);
  const submission = await signMppSubmission(signer, request, { method, resource: url, now: now() });
  const confirmation = await fetch(request.paymentEndpoint, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(submissionBody(submission)),
  });
  if (confirmation.status !== 200) throw new Error(`payment refused: ${confirmation.status} ${await confirmation.text()}`);
  const token = confirmation.headers.get(X_MPP_SESSION);
  if (token === null) throw new Error("confirmation without X-MPP-Session");
  const paid = await fetch(url, { headers: { [X_MPP_SESSION]: token } });
  // A service without sessions hands out a single-use token: nothing worth keeping.
  return finish(paid, agentId, origin, sessions, request.amountUnits, true, request.sessionSupported);
}

async function finish(
  response: Response,
  agentId: string,
  origin: string,
  sessions: MppSessions,
  amountUnits: bigint,
  negotiated: boolean,
  keep: boolean,
): Promise<MppPaid> {
  const body = (await response.json()) as Record<string, unknown>;
  if (response.status !== 200) throw new Error(`paid request answered ${response.status}: ${JSON.stringify(body)}`);
  const token = response.headers.get(X_MPP_SESSION);
  if (token !== null && keep) sessions.put(agentId, origin, { token, amountUnits });
  return {
    status: response.status,
    body,
    headers: response.headers,
    negotiated,
    txHash: String(body.txHash),
    sessionId: String(body.sessionId),
  };
}
