/**
 * Policies (spec 4.9 Policies tab, spec 6 "Policy Events"). First the rejected payments, newest
 * first, paged, filtered by agent, reason and domain: reason (daily budget exceeded, per-call
 * limit, domain not allowed, rate limit, ...), endpoint, the requested amount against the limit,
 * agent and time. Below, each agent's daily-budget use (spec 3's 80 % warning and the exhausted
 * state), paged and ranked by use; with one agent chosen, that agent's whole policy and the
 * backtest panel (./policy-backtest.tsx: a candidate policy over its recorded payments).
 */
import { type ReactNode, useState } from "react";
import { useQuery } from "urql";
import { CursorPager, useCursorPages } from "../components/cursor-pager";
import { Link } from "../components/link";
import { AgentFilter, SelectFilter, TextFilter } from "../components/filters";
import { Pager } from "../components/pager";
import { TableState } from "../components/states";
import { type Column, DataTable } from "../components/table";
import { Truncated } from "../components/truncated";
import { AgentLink, Amount, Time } from "../components/values";
import {
  BUDGET_USE,
  type BudgetStateName,
  type BudgetUseData,
  type BudgetUseRow,
  type BudgetUseVariables,
  POLICY_FIELDS,
  type PolicyRow,
  REJECTIONS,
  type RejectionsVariables,
  type TransactionRow,
  type TransactionsData,
} from "../graphql/queries";
import { formatAmount } from "../money";
import { href, setParams } from "../router";
import { PolicyBacktest } from "./policy-backtest";

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
      {domain ? <span className="muted"> (nothing may be paid to this domain)</span> : null}
    </span>
  );
}

export function BudgetMeter({
  agentId,
  used,
  budget,
  usedUnits,
  budgetUnits,
  percent,
  state,
}: {
  agentId: string;
  used: string;
  budget: string;
  usedUnits: string;
  budgetUnits: string;
  percent: string;
  state: BudgetStateName;
}): ReactNode {
  const width = BigInt(budgetUnits) === 0n ? 100 : Number((BigInt(usedUnits) * 100n) / BigInt(budgetUnits));
  return (
    <div className={`meter meter-${state}`}>
      <div className="meter-text">
        <Amount value={used} /> of <Amount value={budget} unit /> used today ({percent} %)
        {state === "warning" ? (
          <strong className="badge badge-warning" data-testid="budget-warning">
            ⚠ over 80 %
          </strong>
        ) : null}
        {state === "exhausted" ? (
          <strong className="badge badge-rejected" data-testid="budget-exhausted">
            exhausted
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
        aria-label={`${agentId}: percent of the daily budget used`}
      >
        {percent} %
      </meter>
    </div>
  );
}

const PAGE = 25;

const REJECTION_COLUMNS: readonly Column[] = [
  { head: "Time", width: "w-time" },
  { head: "Agent", width: "w-agent" },
  { head: "Reason", width: "w-reason" },
  { head: "Requested vs limit", width: "w-terms", opt: true },
  { head: "Endpoint", width: "" },
];

function Rejections({ agentId, reason, domain }: { agentId: string | null; reason: string | null; domain: string | null }): ReactNode {
  const pages = useCursorPages("");
  const variables: RejectionsVariables = { agentId, reason, domain, limit: PAGE, after: pages.after };
  const [{ data, error, fetching }, refetch] = useQuery<TransactionsData, RejectionsVariables>({ query: REJECTIONS, variables });
  const nodes = data?.transactions.nodes ?? [];
  return (
    <>
      <TableState
        what="rejected payments"
        error={error}
        fetching={fetching}
        loaded={data !== undefined}
        empty={nodes.length === 0}
        emptyText={pages.cursors.length === 0 ? "No payment was rejected (with these filters)." : "No older rejections."}
        refetch={refetch}
      >
        <DataTable testId="rejections-table" caption="Rejected payments (policy events), newest first" columns={REJECTION_COLUMNS}>
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
              <td className="opt">
                <Terms tx={tx} />
              </td>
              <td>
                <Truncated text={tx.endpoint} className="endpoint" />
              </td>
            </tr>
          ))}
        </DataTable>
      </TableState>
      <CursorPager
        label="Rejected payments: pages"
        testId="rejections-range"
        pages={pages}
        size={PAGE}
        shown={nodes.length}
        pageInfo={data?.transactions.pageInfo}
      />
    </>
  );
}

function BudgetUseTable({ state, order }: { state: BudgetStateName | null; order: "use" | "agent" }): ReactNode {
  const [offset, setOffset] = useState(0);
  const variables: BudgetUseVariables = { state, order, first: PAGE, offset };
  const [{ data, error, fetching }, refetch] = useQuery<BudgetUseData, BudgetUseVariables>({ query: BUDGET_USE, variables });
  const use = data?.budgetUse;
  const rows: BudgetUseRow[] = use?.nodes ?? [];
  return (
    <>
      {use !== undefined ? (
        <p className="muted" data-testid="budget-counts">
          {use.totalCount.toLocaleString("en-GB")} agents with a daily budget: {use.warningCount.toLocaleString("en-GB")} over 80 %,{" "}
          {use.exhaustedCount.toLocaleString("en-GB")} exhausted.
        </p>
      ) : null}
      <TableState
        what="budget use"
        error={error}
        fetching={fetching}
        loaded={use !== undefined}
        empty={rows.length === 0}
        emptyText={state === null ? "No agent has a daily budget." : `No agent is in the ${state} state.`}
        refetch={refetch}
      >
        <DataTable
          testId="policy-table"
          caption="Daily budget use per agent"
          columns={[
            { head: "Agent", width: "w-agent-wide" },
            {
              head: (
                <button
                  type="button"
                  className="sort"
                  onClick={() => setParams({ sort: order === "use" ? "agent" : null })}
                  data-testid="sort-by-use"
                >
                  Used today {order === "use" ? "▼ (highest first)" : "(sort by use)"}
                </button>
              ),
              width: "",
              sort: order === "use" ? "descending" : "none",
            },
            { head: "State", width: "w-state", opt: true },
            { head: "Resets", width: "w-time", opt: true },
          ]}
        >
          {rows.map((row) => (
            <tr key={row.agentId} data-agent={row.agentId} data-budget-state={row.budgetState} data-percent={row.percent}>
              <th scope="row">
                <AgentLink agentId={row.agentId} />
              </th>
              <td>
                <BudgetMeter
                  agentId={row.agentId}
                  used={row.usedToday}
                  budget={row.dailyBudget}
                  usedUnits={row.usedTodayUnits}
                  budgetUnits={row.dailyBudgetUnits}
                  percent={row.percent}
                  state={row.budgetState}
                />
              </td>
              <td className="opt">{row.budgetState}</td>
              <td className="opt">{row.windowResetsAt === null ? <span className="muted">—</span> : <Time iso={row.windowResetsAt} />}</td>
            </tr>
          ))}
        </DataTable>
      </TableState>
      <Pager
        label="Budget use: pages"
        offset={offset}
        size={PAGE}
        shown={rows.length}
        total={
          use === undefined
            ? undefined
            : state === null
              ? use.totalCount
              : state === "warning"
                ? use.warningCount
                : state === "exhausted"
                  ? use.exhaustedCount
                  : use.totalCount - use.warningCount - use.exhaustedCount
        }
        onPage={setOffset}
      />
    </>
  );
}

interface OnePolicyData {
  readonly policy: PolicyRow;
}

const ONE_POLICY = `query OnePolicy($agentId: ID!) { policy(agentId: $agentId) { ${POLICY_FIELDS} } }`;

/** One agent's whole policy (limits, rate usage, domains). */
function AgentPolicy({ agentId }: { agentId: string }): ReactNode {
  const [{ data, error, fetching }] = useQuery<OnePolicyData>({ query: ONE_POLICY, variables: { agentId } });
  const policy = data?.policy;
  return (
    <TableState what="the policy" error={error} fetching={fetching} loaded={policy !== undefined}>
      {policy === undefined ? null : (
        <dl className="facts" data-testid="agent-policy">
          <dt>Agent</dt>
          <dd>
            <Truncated text={policy.agentId} />
          </dd>
          <dt>Daily budget</dt>
          <dd>
            {policy.dailyBudget === null ? (
              <>
                none (<Amount value={policy.usedToday} unit /> used today)
              </>
            ) : (
              <>
                <Amount value={policy.usedToday} /> of <Amount value={policy.dailyBudget} unit /> used today ({policy.budgetState})
              </>
            )}
          </dd>
          <dt>Per call</dt>
          <dd>{policy.perCallLimit === null ? "none" : <Amount value={policy.perCallLimit} unit />}</dd>
          <dt>Rate limit</dt>
          <dd>
            {policy.rateLimit === null
              ? "none"
              : `${policy.rateUsage.calls} of ${policy.rateLimit.calls} calls per ${policy.rateLimit.window}`}
          </dd>
          <dt>Domains</dt>
          <dd>
            {policy.allowedDomains === null ? "any" : `only ${policy.allowedDomains.join(", ") || "(none)"}`}
            {policy.blockedDomains.length > 0 ? `; blocked ${policy.blockedDomains.join(", ")}` : ""}
          </dd>
          <dt>Protocol</dt>
          <dd>{policy.protocolPreference}</dd>
          <dt>Approval</dt>
          <dd data-testid="policy-approval">
            {policy.approval === null ? (
              "none: every payment inside the limits is paid"
            ) : (
              <>
                held for a person
                {policy.approval.above === null ? null : (
                  <>
                    {" "}
                    above <Amount value={policy.approval.above} unit />
                  </>
                )}
                {policy.approval.domains.length > 0 ? `; to ${policy.approval.domains.join(", ")}` : ""}
                {policy.approval.firstPaymentToDomain ? "; first payment to a domain" : ""}; waits {policy.approval.timeout}, then{" "}
                {policy.approval.onTimeout} (<Link to={href("approvals")}>approvals</Link>)
              </>
            )}
          </dd>
          <dt>Per endpoint</dt>
          <dd data-testid="policy-endpoint-budgets">
            {policy.endpointBudgets.length === 0 ? (
              "none"
            ) : (
              <ul className="plain">
                {policy.endpointBudgets.map((rule) => (
                  <li key={rule.match}>
                    <span className="endpoint">{rule.match}</span>
                    {rule.dailyBudget === null ? null : (
                      <>
                        : daily <Amount value={rule.dailyBudget} unit />
                      </>
                    )}
                    {rule.perCallLimit === null ? null : (
                      <>
                        ; per call <Amount value={rule.perCallLimit} unit />
                      </>
                    )}
                    {rule.rateLimit === null ? null : `; ${rule.rateLimit.calls} calls per ${rule.rateLimit.window}`}
                  </li>
                ))}
              </ul>
            )}
          </dd>
          <dt>Version</dt>
          <dd data-testid="policy-version">
            {policy.version === 0 ? "never set" : `v${policy.version}`}
            {policy.updatedAt === null ? null : (
              <span className="muted">
                {" "}
                since <Time iso={policy.updatedAt} />
              </span>
            )}
          </dd>
        </dl>
      )}
    </TableState>
  );
}

const BUDGET_STATES: readonly BudgetStateName[] = ["open", "warning", "exhausted"];

export function PoliciesView({ params }: { params: URLSearchParams }): ReactNode {
  const agentId = params.get("agent");
  const reasonParam = params.get("reason");
  const reason = reasonParam !== null && reasonParam in REASONS ? reasonParam : null;
  const domain = params.get("domain");
  const stateParam = params.get("state");
  const state = BUDGET_STATES.find((s) => s === stateParam) ?? null;
  const order = params.get("sort") === "agent" ? "agent" : "use";
  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Policies</h1>
      <h2 id="rejections">Rejected payments</h2>
      <div className="filters">
        <AgentFilter value={agentId} />
        <SelectFilter label="Reason" name="reason" value={reason ?? ""} options={[["", "Any"], ...Object.entries(REASONS)]} />
        <TextFilter label="Domain" name="domain" value={domain ?? ""} placeholder="api.example.com" />
      </div>
      <Rejections key={`${agentId}|${reason}|${domain}`} agentId={agentId} reason={reason} domain={domain} />
      {agentId !== null ? (
        <>
          <h2>Policy of this agent</h2>
          <AgentPolicy agentId={agentId} />
          <h2 id="backtest">Backtest a candidate policy</h2>
          <PolicyBacktest key={agentId} agentId={agentId} />
        </>
      ) : null}
      <h2 id="budgets">Budget use per agent</h2>
      <div className="filters">
        <SelectFilter
          label="State"
          name="state"
          value={state ?? ""}
          options={[
            ["", "Any"],
            ["warning", "over 80 %"],
            ["exhausted", "exhausted"],
            ["open", "open"],
          ]}
        />
      </div>
      <BudgetUseTable key={`${state}|${order}`} state={state} order={order} />
    </section>
  );
}
