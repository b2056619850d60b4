/**
 * Approvals (docs/policy.md "Approvals"): the payments the account's policies held for a person.
 * On top the pending ones, oldest deadline first, each with its agent, amount, endpoint, the rule
 * and reason that held it, when it was asked and a countdown to the gateway's timeout, and
 * Approve / Deny with an optional note; below, the decided ones, newest first.
 *
 * Reads go through GraphQL (`approvals`); a decision is the REST call every other client makes,
 * `POST /v1/approvals/{id}/approve|deny`, which accepts the signed-in session (cookie + CSRF
 * header) besides API keys, so the decision is recorded under the key the person signed in with.
 * The pending list is re-read every few seconds, so a payment held meanwhile shows up by itself.
 */
import { type ReactNode, useEffect, useState } from "react";
import { useQuery } from "urql";
import { CursorPager, useCursorPages } from "../components/cursor-pager";
import { TableState } from "../components/states";
import { type Column, DataTable } from "../components/table";
import { Truncated } from "../components/truncated";
import { AgentLink, Amount, StatusBadge, Time } from "../components/values";
import { APPROVALS, type ApprovalRow, type ApprovalsData, type ApprovalsVariables } from "../graphql/queries";
import { CSRF_HEADERS, reportUnauthenticated } from "../session";

const PENDING_REFRESH_MS = 3_000;
const PAGE = 25;
const NOTE_MAX = 500;

/** The rule that held a payment, in words. */
const RULES: Record<string, string> = {
  above: "Above the approval threshold",
  domains: "Domain needs approval",
  firstPaymentToDomain: "First payment to this domain",
};

/** The current time, ticking every `everyMs` (the countdowns). */
function useNow(everyMs: number): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = window.setInterval(() => setNow(Date.now()), everyMs);
    return () => window.clearInterval(timer);
  }, [everyMs]);
  return now;
}

/** `4m 05s left`, `2h 10m left`, or `expiring…` once the deadline passed (the gateway decides then). */
export function timeLeft(expiresAt: string, now: number): string {
  const seconds = Math.floor((Date.parse(expiresAt) - now) / 1000);
  if (seconds <= 0) return "expiring…";
  const d = Math.floor(seconds / 86_400);
  const h = Math.floor((seconds % 86_400) / 3_600);
  const m = Math.floor((seconds % 3_600) / 60);
  const s = seconds % 60;
  if (d > 0) return `${d}d ${h}h left`;
  if (h > 0) return `${h}h ${String(m).padStart(2, "0")}m left`;
  return `${m}m ${String(s).padStart(2, "0")}s left`;
}

/** The REST decision with the session; answers null, or what went wrong in words. */
async function decide(id: string, action: "approve" | "deny", note: string): Promise<string | null> {
  let response: Response;
  try {
    response = await fetch(`/v1/approvals/${encodeURIComponent(id)}/${action}`, {
      method: "POST",
      credentials: "same-origin",
      cache: "no-store",
      // A retried click decides once; `randomUUID` exists in secure contexts (https, localhost) only.
      headers: {
        ...CSRF_HEADERS,
        "content-type": "application/json",
        ...(typeof crypto.randomUUID === "function" ? { "idempotency-key": crypto.randomUUID() } : {}),
      },
      body: JSON.stringify(note.trim() === "" ? {} : { note: note.trim() }),
    });
  } catch {
    return "The API cannot be reached. Is the system running (npm start)?";
  }
  if (response.ok) return null;
  if (response.status === 401) reportUnauthenticated();
  try {
    const problem = (await response.json()) as { detail?: unknown };
    if (typeof problem.detail === "string") return problem.detail;
  } catch {
    // Not a problem body: the status says it.
  }
  return `The decision failed (HTTP ${response.status}).`;
}

function Reason({ approval }: { approval: ApprovalRow }): ReactNode {
  return (
    <span title={approval.reason}>
      <strong>{RULES[approval.rule] ?? approval.rule}</strong>
      <br />
      <span className="muted">{approval.reason.replace(/^approval_required:\s*/, "")}</span>
    </span>
  );
}

function Decision({ approval, decided }: { approval: ApprovalRow; decided: () => void }): ReactNode {
  const [note, setNote] = useState("");
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  const run = async (action: "approve" | "deny"): Promise<void> => {
    setBusy(true);
    setFailure(null);
    const problem = await decide(approval.id, action, note);
    setBusy(false);
    if (problem !== null) setFailure(problem);
    decided();
  };
  const noteId = `note-${approval.id}`;
  return (
    <div className="decision">
      <label htmlFor={noteId} className="visually-hidden">
        Note for the decision on {approval.agentId}'s payment of {approval.amount} USDC
      </label>
      <input
        id={noteId}
        type="text"
        placeholder="Note (optional)"
        maxLength={NOTE_MAX}
        value={note}
        disabled={busy}
        onChange={(event) => setNote(event.target.value)}
      />
      <button type="button" disabled={busy} onClick={() => void run("approve")} data-testid="approve">
        Approve
      </button>
      <button type="button" disabled={busy} onClick={() => void run("deny")} data-testid="deny">
        Deny
      </button>
      {failure !== null ? (
        <p className="error" role="alert">
          {failure}
        </p>
      ) : null}
    </div>
  );
}

const PENDING_COLUMNS: readonly Column[] = [
  { head: "Agent", width: "w-agent" },
  { head: "Amount", width: "w-amount", num: true },
  { head: "Endpoint", width: "" },
  { head: "Why held", width: "w-reason" },
  { head: "Requested", width: "w-time", opt: true },
  { head: "Expires", width: "w-time" },
  { head: "Decision", width: "w-decision" },
];

function Pending(): ReactNode {
  const now = useNow(1_000);
  const variables: ApprovalsVariables = { status: "pending", first: 100 };
  const [{ data, error, fetching }, refetch] = useQuery<ApprovalsData, ApprovalsVariables>({ query: APPROVALS, variables });
  useEffect(() => {
    const timer = window.setInterval(() => refetch({ requestPolicy: "network-only" }), PENDING_REFRESH_MS);
    return () => window.clearInterval(timer);
  }, [refetch]);
  // The one closest to its deadline first: it needs a person soonest.
  const nodes = [...(data?.approvals.nodes ?? [])].sort((a, b) => Date.parse(a.expiresAt) - Date.parse(b.expiresAt));
  return (
    <TableState
      what="pending approvals"
      error={error}
      fetching={fetching}
      loaded={data !== undefined}
      empty={nodes.length === 0}
      emptyText="No payment is waiting for a decision."
      refetch={refetch}
    >
      <DataTable testId="pending-approvals" caption="Payments waiting for a decision, closest deadline first" columns={PENDING_COLUMNS}>
        {nodes.map((approval) => (
          <tr key={approval.id} data-testid="pending-approval" data-approval-id={approval.id}>
            <td>
              <AgentLink agentId={approval.agentId} />
            </td>
            <td className="num">
              <Amount value={approval.amount} unit />
            </td>
            <td>
              <Truncated text={approval.endpoint} />
            </td>
            <td>
              <Reason approval={approval} />
            </td>
            <td className="opt">
              <Time iso={approval.requestedAt} />
            </td>
            <td data-testid="expires">
              <time dateTime={approval.expiresAt}>{timeLeft(approval.expiresAt, now)}</time>
            </td>
            <td>
              <Decision approval={approval} decided={() => refetch({ requestPolicy: "network-only" })} />
            </td>
          </tr>
        ))}
      </DataTable>
    </TableState>
  );
}

const DECIDED_COLUMNS: readonly Column[] = [
  { head: "Decided", width: "w-time" },
  { head: "Agent", width: "w-agent" },
  { head: "Amount", width: "w-amount", num: true },
  { head: "Status", width: "w-status" },
  { head: "By", width: "w-agent", opt: true },
  { head: "Note", width: "", opt: true },
  { head: "Endpoint", width: "" },
];

/** Who decided: the deciding key's id, the signed link, or the gateway's timeout. */
function decider(approval: ApprovalRow): string {
  if (approval.decidedBy === "link") return "signed link";
  if (approval.decidedBy === "timeout") return "timeout";
  return approval.decidedBy === null ? "—" : `key ${approval.decidedBy}`;
}

function Decided(): ReactNode {
  const pages = useCursorPages("");
  const variables: ApprovalsVariables = { status: null, first: PAGE, after: pages.after };
  const [{ data, error, fetching }, refetch] = useQuery<ApprovalsData, ApprovalsVariables>({ query: APPROVALS, variables });
  useEffect(() => {
    const timer = window.setInterval(() => refetch({ requestPolicy: "network-only" }), PENDING_REFRESH_MS);
    return () => window.clearInterval(timer);
  }, [refetch]);
  const all = data?.approvals.nodes ?? [];
  const nodes = all.filter((approval) => approval.status !== "pending");
  return (
    <>
      <TableState
        what="decided approvals"
        error={error}
        fetching={fetching}
        loaded={data !== undefined}
        empty={nodes.length === 0}
        emptyText={pages.cursors.length === 0 ? "No approval was decided yet." : "No older decisions."}
        refetch={refetch}
      >
        <DataTable testId="decided-approvals" caption="Decided approvals, newest request first" columns={DECIDED_COLUMNS}>
          {nodes.map((approval) => (
            <tr key={approval.id} data-testid="decided-approval" data-approval-id={approval.id} data-status={approval.status}>
              <td>{approval.decidedAt === null ? "—" : <Time iso={approval.decidedAt} />}</td>
              <td>
                <AgentLink agentId={approval.agentId} />
              </td>
              <td className="num">
                <Amount value={approval.amount} unit />
              </td>
              <td>
                <StatusBadge status={approval.status} />
                {approval.outcome === "refused" ? <span className="muted"> (refused on re-check)</span> : null}
              </td>
              <td className="opt">{decider(approval)}</td>
              <td className="opt">{approval.note ?? <span className="muted">—</span>}</td>
              <td>
                <Truncated text={approval.endpoint} />
              </td>
            </tr>
          ))}
        </DataTable>
      </TableState>
      <CursorPager
        label="Decided approvals pages"
        testId="decided-pager"
        pages={pages}
        size={PAGE}
        shown={all.length}
        pageInfo={data?.approvals.pageInfo}
      />
    </>
  );
}

export function ApprovalsView(): ReactNode {
  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Approvals</h1>
      <p className="muted">
        Payments the agents' policies held for a person. Approving re-runs the whole policy; a payment nobody decides is denied when it
        expires.
      </p>
      <h2>Waiting for a decision</h2>
      <Pending />
      <h2>Decided</h2>
      <Decided />
    </section>
  );
}
