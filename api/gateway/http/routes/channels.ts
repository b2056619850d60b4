/**
 * Channel sessions (use cases in api/gateway/channels, docs/rest.md "Channel sessions"):
 *
 * - `POST /v1/agents/{agentId}/channels` opens a session: the deposit is reserved within the
 *   agent's spend policy, then open_channel is sent and confirmed (Idempotency-Key: a retry
 *   answers the same session). A refusal is recorded and answered like a refused payment.
 * - `GET /v1/channels/{channel}`: the session as the payer's account sees it.
 * - `POST /v1/channels/{channel}/vouchers` signs the next charge (payer's account).
 * - `POST /v1/channels/{channel}/settlements`: a payee presents its highest accepted voucher and
 *   the charges since its last presentation; the gateway settles them on chain. Any account's
 *   key: the money only ever goes to the channel's payee.
 * - `POST /v1/channels/{channel}/close` (payer's account): settle, close, refund.
 *
 * Money in: decimal strings (`"0.25"`) or JSON numbers for USDC amounts, integer strings for
 * `…Units`; money out: both the decimal string and the `…Units` integer string.
 */
import type { PublicKey } from "@solana/web3.js";
import { publicAgentId } from "../../../shared/agent-ids.js";
import { findSession } from "../../channels/store.js";
import { badRequest, httpError } from "../../../shared/http/problem.js";
import { runExternalEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { budgetExceededAnswer, policyViolationAnswer } from "../refusals.js";
import { objectBody, optionalString, requireActiveAgent, stringField } from "../../../shared/http/input.js";
import { isRecord, JsonNumber, type JsonValue } from "../../../shared/http/json.js";
import { json } from "../../../shared/http/router.js";
import { formatUsdcShort, parseUsdc, USDC_DECIMALS } from "../../../shared/money.js";
import { parseTxHash } from "../../../shared/validation.js";
import {
  type ChannelSessions,
  channelNotFound,
  DEFAULT_EXPIRES_IN_SECONDS,
  DEFAULT_WITHDRAW_DELAY_SECONDS,
  MAX_EXPIRES_IN_SECONDS,
  MAX_WITHDRAW_DELAY_SECONDS,
  type OpenResult,
  type PresentedCharge,
  type SessionRow,
  type SignedCharge,
} from "../../channels/index.js";
import type { Route, RouteContext } from "../deps.js";

const U64_MAX = (1n << 64n) - 1n;
const ADDRESS = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/;

function requireChannels(context: RouteContext): ChannelSessions {
  const channels = context.deps.channels;
  if (channels === undefined) throw httpError("SERVICE_UNAVAILABLE", "channel sessions are not configured on this server");
  return channels;
}

/** A USDC amount: a decimal string or a JSON number token, > 0. */
function usdcField(value: JsonValue | undefined, field: string): bigint {
  const text = typeof value === "string" ? value : value instanceof JsonNumber ? value.text : null;
  if (text === null) throw badRequest(field, 'must be a decimal string (a usdc amount such as "1.5")');
  const units = parseUsdc(text);
  if (units === "not_a_decimal") throw badRequest(field, `must be a non-negative decimal without exponent, got ${text}`);
  if (units === "too_many_decimals") throw badRequest(field, `has more than ${USDC_DECIMALS} decimal places: ${text}`);
  if (units === "too_large") throw badRequest(field, "is too large");
  if (units === 0n) throw badRequest(field, "must be positive");
  return units;
}

/** An unsigned 64-bit integer as a string of digits (or a JSON integer). */
function u64Field(value: JsonValue | undefined, field: string, min = 0n): bigint {
  const text = typeof value === "string" ? value : value instanceof JsonNumber ? value.text : null;
  if (text === null || !/^(0|[1-9]\d{0,19})$/.test(text)) throw badRequest(field, "must be a non-negative integer string");
  const units = BigInt(text);
  if (units > U64_MAX) throw badRequest(field, "is too large");
  if (units < min) throw badRequest(field, `must be at least ${min}`);
  return units;
}

function optionalSeconds(value: JsonValue | undefined, field: string, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  const seconds = Number(u64Field(value, field, 1n));
  if (seconds > max) throw badRequest(field, `must be at most ${max}`);
  return seconds;
}

/** The public id of the agent paying through the addressed channel, or null when the account has no such channel. */
async function channelAgent(context: RouteContext): Promise<string | null> {
  const session = await findSession(context.deps.pool, channelParam(context));
  return session === null || session.accountId !== context.caller.accountId ? null : publicAgentId(session.agentId);
}

function channelParam(context: RouteContext): string {
  const channel = context.params.channel!;
  if (!ADDRESS.test(channel)) throw channelNotFound(channel);
  return channel;
}

function originOf(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw badRequest("serviceOrigin", "must be an http(s) origin such as https://api.example.com");
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.origin === "null") {
    throw badRequest("serviceOrigin", "must be an http(s) origin such as https://api.example.com");
  }
  return url.origin;
}

const money = (name: string, units: bigint) => ({ [name]: formatUsdcShort(units), [`${name}Units`]: units.toString() });
const moneyOrNull = (name: string, units: bigint | null) =>
  units === null ? { [name]: null, [`${name}Units`]: null } : money(name, units);

/** The session's answer (the open's 201 and `GET`). */
export function sessionView(session: SessionRow, programId: PublicKey): Record<string, unknown> {
  return {
    channel: session.channel,
    channelId: session.channelId,
    programId: programId.toBase58(),
    agentId: publicAgentId(session.agentId),
    payer: session.payer,
    payee: session.payee,
    mint: session.mint,
    ...money("deposit", session.depositUnits),
    expiresAt: session.expiresAt.toISOString(),
    withdrawDelaySeconds: session.withdrawDelaySeconds,
    openedSlot: session.openedSlot?.toString() ?? null,
    openTx: session.openTx,
    status: session.status,
    serviceOrigin: session.serviceOrigin,
    protocol: session.protocol,
    parentTxHash: session.parentTxHash,
    ...money("signedCumulative", session.signedCumulative),
    signedSequence: session.signedSequence.toString(),
    ...money("acceptedCumulative", session.acceptedCumulative),
    acceptedSequence: session.acceptedSequence.toString(),
    ...money("settledCumulative", session.settledCumulative),
    settledSequence: session.settledSequence.toString(),
    ...moneyOrNull("refunded", session.refundedUnits),
    closeTx: session.closeTx,
    refundTx: session.refundTx,
  };
}

async function openRoute(context: RouteContext): Promise<RouteResponse> {
  const channels = requireChannels(context);
  const agent = await requireActiveAgent(context, context.params.agentId!);
  const body = objectBody(
    context.body,
    ["payee", "serviceOrigin", "deposit", "protocol"],
    ["expiresInSeconds", "withdrawDelaySeconds", "parentTxHash"],
  );
  const payee = stringField(body.payee, "payee", 64);
  const serviceOrigin = originOf(stringField(body.serviceOrigin, "serviceOrigin", 2_048));
  const depositUnits = usdcField(body.deposit, "deposit");
  const protocol = stringField(body.protocol, "protocol", 8);
  if (protocol !== "mpp" && protocol !== "x402") throw badRequest("protocol", "must be mpp or x402");
  const expiresInSeconds = optionalSeconds(body.expiresInSeconds, "expiresInSeconds", DEFAULT_EXPIRES_IN_SECONDS, MAX_EXPIRES_IN_SECONDS);
  const withdrawDelaySeconds = optionalSeconds(
    body.withdrawDelaySeconds,
    "withdrawDelaySeconds",
    DEFAULT_WITHDRAW_DELAY_SECONDS,
    MAX_WITHDRAW_DELAY_SECONDS,
  );
  const parentText = optionalString(body.parentTxHash, "parentTxHash", 128);
  const parentTxHash = parentText === undefined ? null : parseTxHash("parentTxHash", parentText);
  return runExternalEffect(context.store, context.idempotency, async ({ reference }) => {
    const result = await channels.open(
      { agent, payee, serviceOrigin, depositUnits, protocol, expiresInSeconds, withdrawDelaySeconds, parentTxHash, reference },
      context.now,
    );
    return { response: openAnswer(result, channels.programId), final: true };
  });
}

function openAnswer(result: OpenResult, programId: PublicKey): RouteResponse {
  if (result.outcome === "budget_exceeded") {
    return budgetExceededAnswer(result.refusal, { parentTxHash: result.parentTxHash, rejectionId: result.rejectionId });
  }
  if (result.outcome === "policy_violation") return policyViolationAnswer(result.decision, result.rejectionId);
  return json(201, sessionView(result.session, programId));
}

async function getRoute(context: RouteContext): Promise<RouteResponse> {
  const channel = channelParam(context);
  const channels = requireChannels(context);
  const session = await channels.session(channel, context.caller.accountId);
  if (session === null) throw channelNotFound(channel);
  return json(200, { ...sessionView(session, channels.programId), settlementTxs: await channels.settlementTxs(channel) });
}

async function voucherRoute(context: RouteContext): Promise<RouteResponse> {
  const channel = channelParam(context);
  const body = objectBody(context.body, ["endpoint", "amount"], []);
  const endpoint = stringField(body.endpoint, "endpoint", 2_048);
  const amountUnits = usdcField(body.amount, "amount");
  const result = await requireChannels(context).sign({ channel, accountId: context.caller.accountId, endpoint, amountUnits }, context.now);
  if (result.outcome === "policy_violation") return policyViolationAnswer(result.decision, result.rejectionId);
  return json(200, voucherView(result.charge));
}

export function voucherView(charge: SignedCharge): Record<string, unknown> {
  return {
    channel: charge.channel,
    sequence: charge.sequence.toString(),
    paymentId: charge.paymentId.toString(),
    ...money("amount", charge.amountUnits),
    ...money("cumulative", charge.cumulativeUnits),
    endpoint: charge.endpoint,
    endpointHash: Buffer.from(charge.endpointHash).toString("hex"),
    digest: Buffer.from(charge.digest).toString("hex"),
    message: Buffer.from(charge.message).toString("base64"),
    signature: charge.signature,
    signer: charge.signer,
    ...money("deposit", charge.depositUnits),
  };
}

const MAX_CHARGES = 10_000;

async function settlementRoute(context: RouteContext): Promise<RouteResponse> {
  const channel = channelParam(context);
  const body = objectBody(context.body, ["cumulative", "sequence", "signature", "charges"], []);
  const cumulativeUnits = u64Field(body.cumulative, "cumulative", 1n);
  const sequence = u64Field(body.sequence, "sequence", 1n);
  const signature = stringField(body.signature, "signature", 100);
  if (!Array.isArray(body.charges)) throw badRequest("charges", "must be a list of { sequence, paymentId, amountUnits, endpoint }");
  if (body.charges.length > MAX_CHARGES) throw badRequest("charges", `at most ${MAX_CHARGES} per presentation`);
  const charges: PresentedCharge[] = body.charges.map((item, i) => {
    if (!isRecord(item)) throw badRequest(`charges[${i}]`, "must be { sequence, paymentId, amountUnits, endpoint }");
    const charge = objectBody(item, ["sequence", "paymentId", "amountUnits", "endpoint"], []);
    return {
      sequence: u64Field(charge.sequence, `charges[${i}].sequence`, 1n),
      paymentId: u64Field(charge.paymentId, `charges[${i}].paymentId`),
      amountUnits: u64Field(charge.amountUnits, `charges[${i}].amountUnits`, 1n),
      endpoint: stringField(charge.endpoint, `charges[${i}].endpoint`, 2_048),
    };
  });
  const { session, settlementTxs } = await requireChannels(context).present({ channel, cumulativeUnits, sequence, signature, charges });
  return json(200, {
    channel,
    ...money("acceptedCumulative", session.acceptedCumulative),
    acceptedSequence: session.acceptedSequence.toString(),
    ...money("settledCumulative", session.settledCumulative),
    settledSequence: session.settledSequence.toString(),
    settlementTxs,
  });
}

async function closeRoute(context: RouteContext): Promise<RouteResponse> {
  const channel = channelParam(context);
  objectBody(context.body ?? {}, [], []);
  const session = await requireChannels(context).close(channel, context.caller.accountId);
  return json(200, {
    channel,
    status: session.status,
    ...money("settledCumulative", session.settledCumulative),
    settledSequence: session.settledSequence.toString(),
    ...moneyOrNull("refunded", session.refundedUnits),
    closeTx: session.closeTx,
    refundTx: session.refundTx,
  });
}

export const channelRoutes: readonly Route[] = [
  { method: "POST", path: "/v1/agents/:agentId/channels", scope: "agent", handler: openRoute },
  { method: "GET", path: "/v1/channels/:channel", scope: "read", agentOf: channelAgent, handler: getRoute },
  { method: "POST", path: "/v1/channels/:channel/vouchers", scope: "agent", agentOf: channelAgent, handler: voucherRoute },
  { method: "POST", path: "/v1/channels/:channel/settlements", scope: "admin", handler: settlementRoute },
  { method: "POST", path: "/v1/channels/:channel/close", scope: "agent", agentOf: channelAgent, handler: closeRoute },
];
