/**
 * Signing the next charge of a session (`POST /v1/channels/{channel}/vouchers`), on every paid
 * request. The deposit's reservation already took the budget, so each charge is held to the rest
 * of the agent's policy, evaluated without a reservation: domains (allow/deny), the per-call
 * limit and the rate limit (its window counts the agent's reservations and its channel charges).
 * Then the session's own rules: the endpoint is on the session's service origin, the cumulative
 * stays within the deposit, the channel is open and not about to expire, its agent not archived
 * (409 AGENT_ARCHIVED; its row is read under a share lock in the same statement).
 *
 * One READ COMMITTED transaction under the session's row lock (`FOR UPDATE`): read session and
 * policy, allocate the payment id from the agent's id sequence (`allocatePaymentId`, the one
 * `record_payment` uses, so ids stay unique across the agent's channels and payments), sign
 * `advanceVoucher`'s next state with the agent's cached key, insert the charge and move
 * `signed_cumulative/sequence` in one statement, commit, answer. Vouchers of one channel are
 * therefore signed one at a time: the sequence has no gap and the cumulative is the exact sum.
 * A refusal is recorded as a rejected payment (with its `policy.violation` event) and committed.
 */
import { PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import type pg from "pg";
import { withTransaction } from "../../../indexer/db/database.js";
import { advanceVoucher, endpointHash, endpointText, voucherMessage } from "../../../programs/payment_ledger/ts/index.js";
import { badRequest } from "../../shared/errors.js";
import { endpointHost } from "../../shared/policy/domains.js";
import { evaluatePolicy, type PolicyRejected, type PolicyUsage } from "../../shared/policy/engine.js";
import { getVersionedPolicy, lockAgentPolicy, readUsage } from "../../shared/policy/store.js";
import { recordRefusedPayment } from "../payments/rejections.js";
import { allocatePaymentId } from "../settlement/store.js";
import type { ChannelDeps } from "./deps.js";
import { channelClosed, channelNotFound, depositExhausted, originMismatch } from "./errors.js";
import { findSession, insertSignedCharge, lockSessionForCharge, type SessionRow } from "./store.js";
import { refuseArchived } from "../../shared/http/input.js";
import { publicAgentId } from "../../shared/agent-ids.js";

/** No voucher is signed this close to expiry: the payee needs the time to settle it. */
export const EXPIRY_MARGIN_MS = 30_000;

export interface ChargeRequest {
  readonly channel: string;
  /** The caller's account: only the payer's account signs on its channels. */
  readonly accountId: string;
  /** `https://host/path` (query ignored for the hash, as spec 2.2 prints endpoints). */
  readonly endpoint: string;
  readonly amountUnits: bigint;
}

export interface SignedCharge {
  readonly channel: string;
  readonly sequence: bigint;
  readonly paymentId: bigint;
  readonly amountUnits: bigint;
  readonly cumulativeUnits: bigint;
  /** Host and path, as hashed. */
  readonly endpoint: string;
  readonly endpointHash: Uint8Array;
  readonly digest: Uint8Array;
  readonly message: Uint8Array;
  /** base58. */
  readonly signature: string;
  /** The payer's wallet (base58). */
  readonly signer: string;
  readonly depositUnits: bigint;
}

export type ChargeResult =
  | { readonly outcome: "signed"; readonly charge: SignedCharge }
  | { readonly outcome: "policy_violation"; readonly decision: PolicyRejected; readonly rejectionId: string };

/** Static facts of a session, cached per process to find the agent's key before the transaction. */
const sessionAgents = new Map<string, { readonly agentId: string; readonly accountId: string }>();
const MAX_CACHED_SESSIONS = 100_000;

export async function signCharge(deps: ChannelDeps, request: ChargeRequest, now: Date): Promise<ChargeResult> {
  const url = parseEndpoint(request.endpoint);
  let agent = sessionAgents.get(request.channel);
  if (agent === undefined) {
    const found = await findSession(deps.pool, request.channel);
    if (found === null || found.accountId !== request.accountId) throw channelNotFound(request.channel);
    agent = { agentId: found.agentId, accountId: found.accountId };
    if (sessionAgents.size >= MAX_CACHED_SESSIONS) sessionAgents.clear();
    sessionAgents.set(request.channel, agent);
  }
  if (agent.accountId !== request.accountId) throw channelNotFound(request.channel);
  const signer = await deps.keys.signer(agent.agentId);
  return withTransaction(
    deps.pool,
    async (client) => {
      const locked = await lockSessionForCharge(client, request.channel);
      if (locked === null) throw channelNotFound(request.channel);
      const { session } = locked;
      refuseArchived({ public_id: publicAgentId(session.agentId), archived_at: locked.archivedAt });
      refuseUnusable(session, now);
      if (url.origin !== session.serviceOrigin) throw originMismatch(request.endpoint, session.serviceOrigin);
      if (session.signedCumulative + request.amountUnits > session.depositUnits) {
        throw depositExhausted(session.channel, session.signedCumulative, request.amountUnits, session.depositUnits);
      }
      const { rejected, policyVersion } = await policyRefusal(client, session, request, now);
      if (rejected !== null) {
        const rejectionId = await recordRefusedPayment(client, {
          agentId: session.agentId,
          amountUnits: request.amountUnits,
          endpoint: request.endpoint,
          protocol: session.protocol,
          rejected,
          at: now,
          policyVersion,
        });
        return { outcome: "policy_violation", decision: rejected, rejectionId } as const;
      }
      const text = endpointText(request.endpoint);
      const hash = endpointHash(text);
      const paymentId = await allocatePaymentId(client, {
        endpointHash: Buffer.from(hash).toString("hex"),
        endpoint: text,
        domain: endpointHost(request.endpoint),
        agentId: session.agentId,
      });
      if (paymentId === null) throw new Error(`agent of channel ${session.channel} has no wallet`);
      const voucher = advanceVoucher(
        { cumulativeUnits: session.signedCumulative, sequence: session.signedSequence, chargesDigest: session.signedDigest! },
        [{ paymentId, amountUnits: request.amountUnits, endpointHash: hash }],
      );
      const message = voucherMessage(new PublicKey(session.channel), voucher);
      const signature = bs58.encode(signer.sign(message));
      const charge: SignedCharge = {
        channel: session.channel,
        sequence: voucher.sequence,
        paymentId,
        amountUnits: request.amountUnits,
        cumulativeUnits: voucher.cumulativeUnits,
        endpoint: text,
        endpointHash: hash,
        digest: voucher.chargesDigest,
        message,
        signature,
        signer: session.payer,
        depositUnits: session.depositUnits,
      };
      await insertSignedCharge(client, charge);
      return { outcome: "signed", charge } as const;
    },
    { isolation: "read committed" },
  );
}

function parseEndpoint(endpoint: string): URL {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw badRequest("endpoint", "must be an http(s) URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw badRequest("endpoint", "must be an http(s) URL");
  return url;
}

function refuseUnusable(session: SessionRow, now: Date): void {
  if (session.status !== "open") throw channelClosed(session.channel, session.status);
  if (now.getTime() >= session.expiresAt.getTime() - EXPIRY_MARGIN_MS) throw channelClosed(session.channel, "expired");
}

/**
 * The agent's policy on one charge, without its budget (the deposit holds it): domains, the
 * per-call limit, the rate limit. The rate window (`readUsage`: the agent's reservations and its
 * channel charges, one running count) is read under the agent's policy lock, the one every
 * reservation takes, so vouchers and ordinary payments are admitted one at a time against the
 * same count; only when the policy has a rate limit.
 */
async function policyRefusal(
  client: pg.PoolClient,
  session: SessionRow,
  request: ChargeRequest,
  now: Date,
): Promise<{ rejected: PolicyRejected | null; policyVersion: number }> {
  let { policy, version: policyVersion } = await getVersionedPolicy(client, session.agentId);
  let usage: PolicyUsage = { usedTodayUnits: 0n, windowStart: null, rateCalls: 0 };
  if (policy.rateLimit !== null || policy.endpointBudgets !== undefined) {
    await lockAgentPolicy(client, session.agentId);
    // Under the lock, the policy read again: a change committed while we waited decides.
    ({ policy, version: policyVersion } = await getVersionedPolicy(client, session.agentId));
    const read = await readUsage(client, session.agentId, policy, now);
    usage = { ...usage, rateCalls: read.rateCalls, ...(read.endpointUsage === undefined ? {} : { endpointUsage: read.endpointUsage }) };
  }
  // The deposit's reservation counted against the daily budgets (the agent's and the rules'); a
  // charge is held to the per-call and rate limits.
  const decision = evaluatePolicy(
    {
      ...policy,
      dailyBudgetUnits: null,
      ...(policy.endpointBudgets === undefined
        ? {}
        : { endpointBudgets: policy.endpointBudgets.map((rule) => ({ ...rule, dailyBudgetUnits: null })) }),
    },
    usage,
    { endpoint: request.endpoint, amountUnits: request.amountUnits, protocol: session.protocol, offeredProtocols: [session.protocol] },
    now,
  );
  return { rejected: decision.decision === "reject" ? decision : null, policyVersion };
}
