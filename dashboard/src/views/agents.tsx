/**
 * Agents and wallets (spec 2.4, 2.5): the account's agents with their wallet balances (read from
 * the chain by the API), and one agent's page linking every view filtered to it.
 */
import type { ReactNode } from "react";
import { useQuery } from "urql";
import { Link } from "../components/link";
import { TextFilter } from "../components/filters";
import { offsetParam, Pager } from "../components/pager";
import { TableState } from "../components/states";
import { type Column, DataTable } from "../components/table";
import { Truncated } from "../components/truncated";
import { AgentLink, Amount, Time } from "../components/values";
import { AGENT_LIST, AGENT_PAGE, type AgentListData, type AgentListVariables, type WalletData } from "../graphql/queries";
import { percentOf } from "../money";
import { href } from "../router";

const PAGE = 50;

const COLUMNS: readonly Column[] = [
  { head: "Agent", width: "w-agent-wide" },
  { head: "Name", width: "w-name", opt: true },
  { head: "Wallet", width: "" },
  { head: "Balance (USDC)", width: "w-amount", num: true },
  { head: "Registered", width: "w-time", opt: true },
];

/** The account's agents, 50 a page, searchable by id or name; balances read for the page shown only. */
export function AgentsView({ params }: { params: URLSearchParams }): ReactNode {
  const search = params.get("q") ?? "";
  const offset = offsetParam(params);
  const variables: AgentListVariables = { search: search === "" ? null : search, first: PAGE, offset };
  const [{ data, fetching, error }, refetch] = useQuery<AgentListData, AgentListVariables>({ query: AGENT_LIST, variables });
  const list = data?.agentList;
  const rows = list?.nodes ?? [];
  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Agents and wallets</h1>
      <div className="filters">
        <TextFilter label="Search agents (id or name)" name="q" value={search} placeholder="researcher" />
      </div>
      <TableState
        what="agents"
        error={error}
        fetching={fetching}
        loaded={list !== undefined}
        empty={rows.length === 0}
        emptyText={search === "" ? "This account has no agents yet (POST /v1/agents registers one)." : `No agent matches "${search}".`}
        refetch={refetch}
      >
        <DataTable testId="agents-table" caption="Agents of the account" captionHidden columns={COLUMNS}>
          {rows.map((agent) => (
            <tr key={agent.agentId} data-agent={agent.agentId}>
              <th scope="row">
                <AgentLink agentId={agent.agentId} />
                {agent.archivedAt ? <span className="badge">archived</span> : null}
              </th>
              <td className="opt">{agent.name ? <Truncated text={agent.name} /> : <span className="muted">—</span>}</td>
              <td>
                <Truncated text={agent.walletAddress} className="address" />
              </td>
              <td className="num">{agent.balance === null ? <span className="muted">unknown</span> : <Amount value={agent.balance} />}</td>
              <td className="opt">
                <Time iso={agent.createdAt} />
              </td>
            </tr>
          ))}
        </DataTable>
      </TableState>
      <Pager label="Agents: pages" offset={offset} size={PAGE} shown={rows.length} total={list?.totalCount} />
    </section>
  );
}

export function AgentView({ agentId }: { agentId: string }): ReactNode {
  const [{ data, fetching, error }] = useQuery<WalletData>({ query: AGENT_PAGE, variables: { agentId } });
  const agent = { agent: agentId };
  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title" className="agent-title">
        Agent <Truncated text={agentId} testId="agent-id" />
      </h1>
      <nav aria-label={`Views of ${agentId}`} className="agent-links">
        <Link to={href("live", agent)}>Live feed</Link>
        <Link to={href("spend", agent)}>Spend</Link>
        <Link to={href("protocols", agent)}>Protocols</Link>
        <Link to={href("policies", agent)}>Policies</Link>
        <Link to={href("ledger", agent)}>Ledger</Link>
        <Link to={href("runs", agent)}>Runs</Link>
        <Link to={href("channels", agent)}>Channels</Link>
      </nav>
      <TableState what="the agent" error={error} fetching={fetching} loaded={data != null}>
        {data == null ? null : (
          <dl className="facts" data-testid="agent-facts">
            <dt>Wallet</dt>
            <dd>
              <Truncated text={data.wallet.address} className="address" /> on {data.wallet.network}
            </dd>
            <dt>Balance</dt>
            <dd data-testid="agent-balance">{data.wallet.balance === null ? "unknown" : <Amount value={data.wallet.balance} unit />}</dd>
            <dt>Daily budget</dt>
            <dd>
              {data.policy.dailyBudget === null ? (
                "none"
              ) : (
                <>
                  <Amount value={data.policy.usedToday} /> of <Amount value={data.policy.dailyBudget} unit /> used (
                  {percentOf(BigInt(data.policy.usedTodayUnits), BigInt(data.policy.dailyBudgetUnits ?? "0"))} %, {data.policy.budgetState})
                </>
              )}
            </dd>
            <dt>Per-call limit</dt>
            <dd>{data.policy.perCallLimit === null ? "none" : <Amount value={data.policy.perCallLimit} unit />}</dd>
            <dt>Rate limit</dt>
            <dd>
              {data.policy.rateLimit === null
                ? "none"
                : `${data.policy.rateUsage.calls} of ${data.policy.rateLimit.calls} calls per ${data.policy.rateLimit.window}`}
            </dd>
          </dl>
        )}
      </TableState>
    </section>
  );
}
