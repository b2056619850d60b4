/**
 * Agents and wallets (spec 2.4, 2.5): the account's agents with their wallet balances (read from
 * the chain by the API), and one agent's page linking every view filtered to it.
 */
import type { ReactNode } from "react";
import { useQuery } from "urql";
import { Link } from "../components/link";
import { TextFilter } from "../components/filters";
import { Pager } from "../components/pager";
import { TableState } from "../components/states";
import { Truncated } from "../components/truncated";
import { AgentLink, Amount, Time } from "../components/values";
import { AGENT_LIST, AGENT_PAGE, type AgentListData, type AgentListVariables, type WalletData } from "../graphql/queries";
import { percentOf } from "../money";
import { href, setParams } from "../router";

const PAGE = 50;

/** The account's agents, 50 a page, searchable by id or name; balances read for the page shown only. */
export function AgentsView({ params }: { params: URLSearchParams }): ReactNode {
  const search = params.get("q") ?? "";
  const offsetParam = Number(params.get("offset") ?? "0");
  const offset = Number.isInteger(offsetParam) && offsetParam >= 0 ? offsetParam : 0;
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
        retry={() => refetch({ requestPolicy: "network-only" })}
      >
        <div className="table-wrap">
          <table className="data" data-testid="agents-table">
            <caption className="visually-hidden">Agents of the account</caption>
            <colgroup>
              <col className="w-agent-wide" />
              <col className="w-name opt" />
              <col />
              <col className="w-amount" />
              <col className="w-time opt" />
            </colgroup>
            <thead>
              <tr>
                <th scope="col">Agent</th>
                <th scope="col" className="opt">
                  Name
                </th>
                <th scope="col">Wallet</th>
                <th scope="col" className="num">
                  Balance (USDC)
                </th>
                <th scope="col" className="opt">
                  Registered
                </th>
              </tr>
            </thead>
            <tbody>
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
                  <td className="num">
                    {agent.balance === null ? <span className="muted">unknown</span> : <Amount value={agent.balance} />}
                  </td>
                  <td className="opt">
                    <Time iso={agent.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </TableState>
      {list !== undefined ? (
        <Pager
          label="Agents: pages"
          offset={offset}
          size={PAGE}
          shown={rows.length}
          total={list.totalCount}
          onPage={(next) => setParams({ offset: next === 0 ? null : String(next) })}
        />
      ) : null}
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
      <TableState what="the agent" error={error} fetching={fetching} loaded={data != null} empty={false} emptyText="">
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
