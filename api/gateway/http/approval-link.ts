/**
 * The signed one-time link of `approval.requested` (docs/rest.md "Approvals"):
 * `/v1/approvals/{id}/decide?token=…`. No API key: the token is the credential. A GET shows a
 * small confirm page (amount, agent, endpoint, reason, approve / deny) and decides nothing, so link
 * previews and scanners change nothing; its form POSTs the decision
 * (`application/x-www-form-urlencoded`: `decision=approve|deny`, optional `note`). The token must
 * match the approval's stored hash and its signature (constant time); a used, wrong or unknown
 * token answers 404 `APPROVAL_NOT_FOUND`, a decided approval 409 `APPROVAL_ALREADY_DECIDED`, each
 * as a page. Served before the router, which speaks JSON to API keys only.
 */
import { withTransaction } from "../../../indexer/db/database.js";
import { type Approval, parseNote } from "../../shared/approvals/approval.js";
import { ServiceError, toServiceError } from "../../shared/errors.js";
import { formatUsdcShort } from "../../shared/money.js";
import { linkTokenHash, verifyLinkToken } from "../../shared/approvals/link-token.js";
import { approvalByLinkHash } from "../../shared/approvals/store.js";
import { decideInTransaction, LINK_KEY_PURPOSE } from "../payments/approvals/index.js";
import type { GatewayDeps } from "./deps.js";
import { approvalDecideDeps } from "./routes/approvals.js";

const PATH = /^\/v1\/approvals\/([^/]+)\/decide\/?$/;
const MAX_FORM_BYTES = 4_096;

const HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  // The token is in the URL: never send it on as a referrer; nothing else loads.
  "referrer-policy": "no-referrer",
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
} as const;

/** The link's pages: a Response for its path, null for any other. */
export function createApprovalLinkHandler(deps: GatewayDeps): (request: Request) => Promise<Response | null> {
  return async (request) => {
    const url = new URL(request.url);
    const match = PATH.exec(url.pathname);
    if (match === null) return null;
    try {
      if (request.method === "GET") return await confirmPage(deps, decodeURIComponent(match[1]!), url.searchParams.get("token"));
      if (request.method === "POST") return await decide(deps, request, decodeURIComponent(match[1]!), url.searchParams.get("token"));
      return new Response(null, { status: 405, headers: { allow: "GET, POST" } });
    } catch (error) {
      const known = toServiceError(error);
      if (known !== null) return errorPage(known);
      deps.logger?.error({ err: error, path: url.pathname }, "approval link failed");
      return page(500, "Something went wrong", "<p>The decision was not recorded. Try again later.</p>");
    }
  };
}

/**
 * The approval the token is a live link of: its hash is stored for this id, its MAC holds and the
 * link is unused. An approval past its `expiresAt` is still returned (a POST then expires it, and
 * the page says it was decided).
 */
async function linkedApproval(deps: GatewayDeps, approvalId: string, token: string | null): Promise<{ approval: Approval; hash: Buffer }> {
  const box = deps.secretBox;
  if (token === null || token.length > 200 || box === undefined) throw deadLink();
  const hash = linkTokenHash(token);
  const found = await approvalByLinkHash(deps.pool, hash);
  if (found === null || found.linkUsed || found.approval.id !== approvalId) throw deadLink();
  const approval = found.approval;
  // Checked against a clock before the expiry: the MAC alone; the expiry is the store's to judge.
  const signedAt = new Date(approval.expiresAt.getTime() - 1);
  if (!verifyLinkToken(box.derivedKey(LINK_KEY_PURPOSE), token, approval.id, approval.expiresAt, signedAt)) throw deadLink();
  return { approval, hash };
}

function deadLink(): ServiceError {
  return new ServiceError("APPROVAL_NOT_FOUND", "this link is not valid: it was used, or it is wrong");
}

async function confirmPage(deps: GatewayDeps, approvalId: string, token: string | null): Promise<Response> {
  const { approval } = await linkedApproval(deps, approvalId, token);
  const now = deps.now?.() ?? new Date();
  if (approval.status !== "pending" || approval.expiresAt.getTime() <= now.getTime()) return decidedPage(approval);
  const action = `/v1/approvals/${encodeURIComponent(approval.id)}/decide?token=${encodeURIComponent(token!)}`;
  return page(
    200,
    "Approve this payment?",
    `${details(approval)}
<form method="post" action="${escapeHtml(action)}">
  <label>Note (optional) <input name="note" maxlength="500"></label>
  <p><button name="decision" value="approve">Approve</button> <button name="decision" value="deny">Deny</button></p>
</form>
<p>Waits until ${escapeHtml(approval.expiresAt.toISOString())}; then it is denied.</p>`,
  );
}

async function decide(deps: GatewayDeps, request: Request, approvalId: string, token: string | null): Promise<Response> {
  const form = await readForm(request);
  const choice = form.get("decision");
  if (choice !== "approve" && choice !== "deny") {
    throw new ServiceError("BAD_USER_INPUT", "decision must be approve or deny", { field: "decision" });
  }
  const note = parseNote(form.get("note") ?? undefined);
  const { hash } = await linkedApproval(deps, approvalId, token);
  const now = deps.now?.() ?? new Date();
  const decided = await withTransaction(
    deps.primary ?? deps.pool,
    (client) =>
      decideInTransaction(client, approvalDecideDeps(deps), {
        decider: { kind: "link", tokenHash: hash },
        decision: choice === "approve" ? "approved" : "denied",
        note,
        now,
      }),
    { isolation: "read committed" },
  );
  if (decided.late) return decidedPage(decided.approval);
  const refused =
    decided.recheck?.outcome === "refused" ? `<p>The policy, run again, refused it: ${escapeHtml(decided.recheck.reason)}</p>` : "";
  return page(200, `Payment ${decided.approval.status}`, `${details(decided.approval)}${refused}<p>Recorded. This link is now used.</p>`);
}

async function readForm(request: Request): Promise<URLSearchParams> {
  const type = (request.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/x-www-form-urlencoded") {
    throw new ServiceError("UNSUPPORTED_MEDIA_TYPE", "send the decision as a form (application/x-www-form-urlencoded)");
  }
  const bytes = new Uint8Array(await request.arrayBuffer());
  if (bytes.length > MAX_FORM_BYTES) throw new ServiceError("PAYLOAD_TOO_LARGE", `the form is at most ${MAX_FORM_BYTES} bytes`);
  return new URLSearchParams(new TextDecoder().decode(bytes));
}

function decidedPage(approval: Approval): Response {
  const status = approval.status === "pending" ? "expired" : approval.status;
  return page(409, `Already decided: ${status}`, `${details(approval)}<p>This payment was already decided; nothing changed.</p>`);
}

function errorPage(error: ServiceError): Response {
  if (error.code === "APPROVAL_ALREADY_DECIDED")
    return page(409, "Already decided", `<p>${escapeHtml(error.message)}; nothing changed.</p>`);
  if (error.code === "APPROVAL_NOT_FOUND") return page(404, "Link not valid", "<p>This link was used already, or it is wrong.</p>");
  return page(error.status, "Not recorded", `<p>${escapeHtml(error.message)}</p>`);
}

function details(approval: Approval): string {
  const rows: [string, string][] = [
    ["Agent", approval.agentId],
    ["Amount", `${formatUsdcShort(approval.amountUnits)} USDC`],
    ["Endpoint", approval.endpoint],
    ["Why", approval.reason],
    ["Status", approval.status],
  ];
  return `<dl>${rows.map(([k, v]) => `<dt>${k}</dt><dd>${escapeHtml(v)}</dd>`).join("")}</dl>`;
}

function page(status: number, title: string, body: string): Response {
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>${escapeHtml(title)}</title><style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:2rem auto;padding:0 1rem}dt{font-weight:600}</style>
</head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;
  return new Response(html, { status, headers: HEADERS });
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}
