/**
 * Policies (spec 4.9 Policies tab, spec 6 "Policy Events"): every rejected payment with its reason
 * (daily budget exceeded, per-call limit, domain not allowed, rate limit, ...), endpoint, the
 * requested amount against the limit, agent and time; and each agent's current policy with
 * `usedToday` against its daily budget (the 80 % warning of spec 3 shown as such).
 */
import { type ReactNode, useState } from "react";
import { useQuery } from "urql";
import { AgentFilter } from "../components/filters";
import { Empty, ErrorBox, Loading } from "../components/states";
import { AgentLink, Amount, Time } from "../components/values";
import {
  POLICIES,
  type PoliciesData,
  type PolicyRow,
  TRANSACTIONS,
  type TransactionRow,
  type TransactionsData,
  type TransactionsVariables,
} from "../graphql/queries";
import { formatAmount, percentOf } from "../money";

/** Spec 7 reason codes, in words. */
export const REASONS: Record<string, string> = {
  daily_budget_exceeded: "Daily budget exceeded",
  per_call_limit_exceeded: "Per-call limit exceeded",
  domain_not_allowed: "Domain not allowed",
  domain_blocked: "Domain blocked",
  rate_limit_exceeded: "Rate limit exceeded",
  invocation_budget_exceeded: "Invocation budget exceeded",
  agent_archived: "Agent archived",
};

function Terms({ tx }: { tx: TransactionRow }): ReactNode {
  if (tx.rejectionRequested === null || tx.rejectionLimit === null) return <span className="muted">{tx.rejectionReason ?? "—"}</span>;
  const unit = tx.rejectionUnit === "usdc" ? "USDC" : (tx.rejectionUnit ?? "");
  const show = (value: string): string => (tx.rejectionUnit === "usdc" ? formatAmount(value) : value);
  const domain = tx.rejectionCode === "domain_not_allowed" || tx.rejectionCode === "domain_blocked";
  return (
    <span className="terms" title={tx.rejectionReason ?? undefined}>
      <span data-testid="requested">{show(tx.rejectionRequested)}</span> {unit} requested, limit{" "}
      <span data-testid="limit">{show(tx.rejectionLimit)}</span> {unit}
      {domain ? <span className="muted"> (nothing may be paid to {tx.domain ?? "this domain"})</span> : null}
    </span>
  );
}

function BudgetMeter({ policy }: { policy: PolicyRow }): ReactNode {
  if (policy.dailyBudgetUnits === null) {
    return (
      <span>
        <Amount value={policy.usedToday} unit /> used today, no daily budget
      </span>
    );
  }
  const used = BigInt(policy.usedTodayUnits);
  const budget = BigInt(policy.dailyBudgetUnits);
  const percent = percentOf(used, budget);
  const width = Number(budget === 0n ? 100n : (used * 100n) / budget);
  return (
    <div className={`meter meter-${policy.budgetState}`}>
      <div className="meter-text">
        <Amount value={policy.usedToday} /> of <Amount value={policy.dailyBudget ?? "0"} unit /> used today ({percent} %)
        {policy.budgetState === "warning" ? (
          <strong className="badge badge-warning" data-testid="budget-warning">
            ⚠ over 80 % of the daily budget
          </strong>
        ) : null}
        {policy.budgetState === "exhausted" ? (
          <strong className="badge badge-rejected" data-testid="budget-exhausted">
            budget exhausted
          </strong>
        ) : null}
      </div>
      <meter
        className="meter-bar"
        min={0}
        max={100}
        low={79.99}
        high={99.99}
        optimum={0}
        value={Math.min(100, width)}
        aria-label={`${policy.agentId}: percent of the daily budget used`}
      >
        {percent} %
      </meter>
    </div>
  );
}

function PolicyTable({ policies }: { policies: readonly PolicyRow[] }): ReactNode {
  return (
    <table className="data" data-testid="policy-table">
      <caption>Current policy of each agent</caption>
      <thead>
        <tr>
          <th scope="col">Agent</th>
          <th scope="col">Daily budget</th>
          <th scope="col" className="num">
            Per call (USDC)
          </th>
          <th scope="col">Rate limit</th>
          <th scope="col">Domains</th>
          <th scope="col">Protocol</th>
        </tr>
      </thead>
      <tbody>
        {policies.map((policy) => (
          <tr key={policy.agentId} data-agent={policy.agentId} data-budget-state={policy.budgetState}>
            <th scope="row">
              <AgentLink agentId={policy.agentId} />
            </th>
            <td>
              <BudgetMeter policy={policy} />
            </td>
            <td className="num">
              {policy.perCallLimit === null ? <span className="muted">none</span> : <Amount value={policy.perCallLimit} />}
            </td>
            <td>
              {policy.rateLimit === null ? (
                <span className="muted">none</span>
              ) : (
                <>
                  {policy.rateUsage.calls} of {policy.rateLimit.calls} calls per {policy.rateLimit.window}
                </>
              )}
            </td>
            <td>
              {policy.allowedDomains === null ? "any" : `only ${policy.allowedDomains.join(", ") || "(none)"}`}
              {policy.blockedDomains.length > 0 ? `; blocked ${policy.blockedDomains.join(", ")}` : ""}
            </td>
            <td>{policy.protocolPreference}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

const PAGE = 50;

function Rejections({ agentId }: { agentId: string | null }): ReactNode {
  const [pages, setPages] = useState<(string | null)[]>([null]);
  return (
    <table className="data" data-testid="rejections-table">
      <caption>Rejected payments (policy events), newest first</caption>
      <thead>
        <tr>
          <th scope="col">Time</th>
          <th scope="col">Agent</th>
          <th scope="col">Reason</th>
          <th scope="col">Requested vs limit</th>
          <th scope="col">Endpoint</th>
        </tr>
      </thead>
      {pages.map((after, index) => (
        <RejectionPage
          key={after ?? "first"}
          agentId={agentId}
          after={after}
          last={index === pages.length - 1}
          more={(cursor) => setPages((current) => [...current, cursor])}
        />
      ))}
    </table>
  );
}

function RejectionPage(props: { agentId: string | null; after: string | null; last: boolean; more: (cursor: string) => void }): ReactNode {
  const variables: TransactionsVariables = { agentId: props.agentId, status: "rejected", limit: PAGE, after: props.after };
  const [{ data, error, fetching }] = useQuery<TransactionsData, TransactionsVariables>({ query: TRANSACTIONS, variables });
  const nodes = data?.transactions.nodes ?? [];
  const page = data?.transactions.pageInfo;
  return (
    <tbody>
      {error !== undefined ? (
        <tr>
          <td colSpan={5}>
            <ErrorBox error={error} />
          </td>
        </tr>
      ) : null}
      {fetching && data == null ? (
        <tr>
          <td colSpan={5}>
            <Loading what="rejected payments" />
          </td>
        </tr>
      ) : null}
      {data != null && nodes.length === 0 && props.after === null ? (
        <tr>
          <td colSpan={5}>
            <Empty>No payment was rejected.</Empty>
          </td>
        </tr>
      ) : null}
      {nodes.map((tx) => (
        <tr key={tx.id} data-testid="rejection-row" data-reason={tx.rejectionCode ?? ""}>
          <td>
            <Time iso={tx.timestamp} />
          </td>
          <td>
            <AgentLink agentId={tx.agentId} />
          </td>
          <td>
            <span className="badge badge-rejected" title={tx.rejectionCode ?? undefined}>
              {REASONS[tx.rejectionCode ?? ""] ?? tx.rejectionCode}
            </span>
          </td>
          <td>
            <Terms tx={tx} />
          </td>
          <td className="endpoint">{tx.endpoint}</td>
        </tr>
      ))}
      {props.last && page?.hasNextPage === true && page.endCursor !== null ? (
        <tr>
          <td colSpan={5}>
            <button type="button" onClick={() => props.more(page.endCursor!)}>
              Show older rejections
            </button>
          </td>
        </tr>
      ) : null}
    </tbody>
  );
}

export function PoliciesView({ params }: { params: URLSearchParams }): ReactNode {
  const agentId = params.get("agent");
  const [{ data, fetching, error }, refetch] = useQuery<PoliciesData>({ query: POLICIES });
  const policies = (data?.policies ?? []).filter((p) => agentId === null || p.agentId === agentId);
  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Policies</h1>
      <div className="filters">
        <AgentFilter value={agentId} />
      </div>
      <h2>Agents' policies</h2>
      {error !== undefined ? <ErrorBox error={error} retry={() => refetch({ requestPolicy: "network-only" })} /> : null}
      {data == null ? (
        fetching ? (
          <Loading what="policies" />
        ) : null
      ) : policies.length === 0 ? (
        <Empty>No agents yet.</Empty>
      ) : (
        <PolicyTable policies={policies} />
      )}
      <h2>Policy events</h2>
      <Rejections key={agentId ?? ""} agentId={agentId} />
    </section>
  );
}
