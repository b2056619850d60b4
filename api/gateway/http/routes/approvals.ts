/**
 * Approvals of held payments (docs/rest.md "Approvals"; the use cases are api/gateway/payments/approvals,
 * this file parses the requests and renders the answers):
 *
 * - `GET /v1/approvals` (admin, approver): the account's approvals, newest first, by `status`,
 *   `agentId`, `limit`, `cursor`;
 * - `GET /v1/approvals/{approvalId}` (any reader; an agent key its own agent's only, another's
 *   is 404 `APPROVAL_NOT_FOUND` as for none): one approval, `?wait=<0–60 s>` long-polls until it is
 *   decided, ended early when the process drains;
 * - `POST /v1/approvals/{approvalId}/approve`, `/deny` (admin, approver; never an agent key, not
 *   even for its own payment): decided once (409 `APPROVAL_ALREADY_DECIDED` after), with the
 *   deciding key's id and an optional note; approving re-runs the policy and answers its outcome.
 *   Both run under the Idempotency-Key: a replay answers the first decision.
 *
 * The signed one-time link (`/v1/approvals/{id}/decide?token=`) needs no key and speaks HTML
 * forms, so it is served beside the router (../approval-link.ts).
 */
import { type Approval, type ApprovalDecision, parseApprovalStatus, parseNote } from "../../../shared/approvals/approval.js";
import { ApprovalNotFoundError } from "../../../shared/approvals/errors.js";
import { APPROVALS_LIMIT_DEFAULT, APPROVALS_LIMIT_MAX, getApproval, listApprovals } from "../../../shared/approvals/store.js";
import { runDatabaseEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { limitParam, objectBody } from "../../../shared/http/input.js";
import { badRequest, httpError, problemResponse } from "../../../shared/http/problem.js";
import { json } from "../../../shared/http/router.js";
import { agentOfAccount } from "../../../shared/agents.js";
import { parseAgentId } from "../../../shared/validation.js";
import { ApprovalAlreadyDecidedError } from "../../../shared/approvals/errors.js";
import { boundAgent } from "../../../shared/scopes.js";
import { sessionKeyId } from "../../../shared/sessions.js";
import {
  approvalWaitsFor,
  type Decided,
  type DecideDeps,
  decideInTransaction,
  MAX_WAIT_SECONDS,
  recheckRefusal,
} from "../../payments/approvals/index.js";
import { type ApprovalRefusal, approvalJson } from "../approval-view.js";
import { invocationBudgetCheck, requireInvocations, requireSubAgentInvocation } from "../../invocations/index.js";
import type { GatewayDeps, Route, RouteContext } from "../deps.js";

/** An agent of the caller's account by its public id → its internal key; an unknown one matches nothing. */
async function agentKeyOf(context: RouteContext, publicId: string): Promise<string> {
  const agent = await agentOfAccount(context.deps.pool, context.caller.accountId, publicId);
  // A key no agent has (a public id holds no "/"): the filter then matches nothing, as for none.
  return agent?.agent_id ?? `/${publicId}`;
}

/** The caller's reading scope: the account, and for an agent key its agent's internal key. */
async function reader(context: RouteContext): Promise<{ accountId: string; agentKey: string | null }> {
  const own = boundAgent(context.caller.scope);
  return { accountId: context.caller.accountId, agentKey: own === null ? null : await agentKeyOf(context, own) };
}

async function listRoute(context: RouteContext): Promise<RouteResponse> {
  const { query } = context;
  const statusText = query.get("status");
  const agentText = query.get("agentId");
  const page = await listApprovals(context.deps.pool, context.caller.accountId, {
    status: statusText === null ? null : parseApprovalStatus(statusText),
    agentKey: agentText === null ? null : await agentKeyOf(context, parseAgentId("agentId", agentText)),
    limit: limitParam(query.get("limit"), APPROVALS_LIMIT_DEFAULT, APPROVALS_LIMIT_MAX),
    cursor: query.get("cursor"),
  });
  const approvals = await Promise.all(page.approvals.map(async (a) => approvalJson(a, await refusalOf(context, a))));
  return json(200, { approvals, nextCursor: page.nextCursor });
}

/** What the re-check refused, for an approval whose outcome is `refused` (one read, for those only). */
async function refusalOf(context: RouteContext, approval: Approval): Promise<ApprovalRefusal | null> {
  return approval.outcome === "refused" ? recheckRefusal(context.deps.pool, approval) : null;
}

/** `?wait=` in whole seconds, 0 to 60; absent: 0. */
function waitSeconds(text: string | null): number {
  if (text === null) return 0;
  if (!/^\d{1,2}$/.test(text) || Number(text) > MAX_WAIT_SECONDS) {
    throw badRequest("wait", `must be a whole number of seconds from 0 to ${MAX_WAIT_SECONDS}`);
  }
  return Number(text);
}

async function getRoute(context: RouteContext): Promise<RouteResponse> {
  const id = context.params.approvalId!;
  const wait = waitSeconds(context.query.get("wait"));
  const who = await reader(context);
  const read = () => getApproval(context.deps.pool, who, id);
  let approval = await read();
  if (approval === null) throw new ApprovalNotFoundError(id);
  if (approval.status === "pending" && wait > 0) {
    const waits = context.deps.approvalWaits ?? approvalWaitsFor(context.deps.pool);
    await waits.wait(id, wait * 1_000, async () => (await read())?.status === "pending");
    approval = (await read()) ?? approval;
  }
  return json(200, approvalJson(approval, await refusalOf(context, approval)));
}

/** For an agent key: the approval's agent, or 404 APPROVAL_NOT_FOUND as for none (the router's scope check). */
async function approvalAgent(context: RouteContext): Promise<string | null> {
  const approval = await getApproval(context.deps.pool, await reader(context), context.params.approvalId!);
  if (approval === null) throw new ApprovalNotFoundError(context.params.approvalId!);
  return approval.agentId;
}

/** The deciding key: the API key, or the key the dashboard session was made with. */
async function decidingKey(context: RouteContext): Promise<string> {
  const credential = context.caller.credential;
  if (credential?.kind === "api_key") return credential.keyId;
  if (credential?.kind === "session") {
    const keyId = await sessionKeyId(context.deps.primary ?? context.deps.pool, credential.sessionId);
    if (keyId !== null) return keyId;
  }
  throw httpError("AUTHENTICATION_ERROR", "deciding an approval needs an API key (who decided is recorded)");
}

function decideRoute(decision: ApprovalDecision) {
  return async (context: RouteContext): Promise<RouteResponse> => {
    const body = objectBody(context.body, [], ["note"]);
    const note = parseNote(body.note);
    const keyId = await decidingKey(context);
    const approvalId = context.params.approvalId!;
    return runDatabaseEffect(context.store, context.idempotency, async (client) => {
      const decided = await decideInTransaction(client, approvalDecideDeps(context.deps), {
        decider: { kind: "key", accountId: context.caller.accountId, keyId, approvalId },
        decision,
        note,
        now: context.now,
      });
      return decidedAnswer(decided);
    });
  };
}

/** The deciding needs of the gateway: a sub-agent's held payment is re-checked against its invocation budget. */
export function approvalDecideDeps(deps: GatewayDeps): DecideDeps {
  return {
    subAgentCheck: (payment) =>
      invocationBudgetCheck({
        agentId: payment.agentKey,
        parentTxHash: payment.parentTxHash,
        amountUnits: payment.amountUnits,
        readInvocation: async () =>
          (await requireSubAgentInvocation(requireInvocations(deps.invocations), payment.parentTxHash, payment.walletAddress)).state,
      }),
  };
}

/** The decision, or, when it came after the deadline, the expiry it committed instead (409). */
export function decidedAnswer(decided: Decided): RouteResponse {
  if (decided.late) return problemResponse(new ApprovalAlreadyDecidedError(decided.approval));
  const recheck = decided.recheck;
  return json(200, approvalJson(decided.approval, recheck?.outcome === "refused" ? recheck : null));
}

export const approvalRoutes: readonly Route[] = [
  { method: "GET", path: "/v1/approvals", scope: "account", handler: listRoute },
  { method: "GET", path: "/v1/approvals/:approvalId", scope: "read", agentOf: approvalAgent, handler: getRoute },
  // session: the dashboard's approvals queue decides with the signed-in person's session.
  { method: "POST", path: "/v1/approvals/:approvalId/approve", scope: "approve", session: true, handler: decideRoute("approved") },
  { method: "POST", path: "/v1/approvals/:approvalId/deny", scope: "approve", session: true, handler: decideRoute("denied") },
];
