/**
 * Agents and wallets (spec 2.4, 2.5): the account's agents with their wallet balances (read from
 * the chain by the API), and one agent's page linking every view filtered to it.
 */
import type { ReactNode } from "react";
import { useQuery } from "urql";
import { Link } from "../components/link";
import { Empty, ErrorBox, Loading } from "../components/states";
import { AgentLink, Amount, Time } from "../components/values";
import { AGENT_PAGE, AGENTS, type AgentsData, type WalletData } from "../graphql/queries";
import { percentOf } from "../money";
import { href } from "../router";

export function AgentsView(): ReactNode {
  const [{ data, fetching, error }, refetch] = useQuery<AgentsData>({ query: AGENTS });
  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Agents and wallets</h1>
      {error !== undefined ? <ErrorBox error={error} retry={() => refetch({ requestPolicy: "network-only" })} /> : null}
      {data == null ? (
        fetching ? (
          <Loading what="agents" />
        ) : null
      ) : data.agents.length === 0 ? (
        <Empty>This account has no agents yet (POST /v1/agents registers one).</Empty>
      ) : (
        <table className="data" data-testid="agents-table">
          <caption className="visually-hidden">Agents of the account</caption>
          <thead>
            <tr>
              <th scope="col">Agent</th>
              <th scope="col">Name</th>
              <th scope="col">Wallet</th>
              <th scope="col" className="num">
                Balance (USDC)
              </th>
              <th scope="col">Registered</th>
            </tr>
          </thead>
          <tbody>
            {data.agents.map((agent) => (
              <tr key={agent.agentId} data-agent={agent.agentId}>
                <th scope="row">
                  <AgentLink agentId={agent.agentId} />
                  {agent.archivedAt ? <span className="badge">archived</span> : null}
                </th>
                <td>{agent.name || <span className="muted">—</span>}</td>
                <td>
                  <code className="address">{agent.walletAddress}</code>
                </td>
                <td className="num">
                  {agent.balance === null ? <span className="muted">unknown</span> : <Amount value={agent.balance} />}
                </td>
                <td>
                  <Time iso={agent.createdAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function AgentView({ agentId }: { agentId: string }): ReactNode {
  const [{ data, fetching, error }] = useQuery<WalletData>({ query: AGENT_PAGE, variables: { agentId } });
  const agent = { agent: agentId };
  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Agent {agentId}</h1>
      <nav aria-label={`Views of ${agentId}`} className="agent-links">
        <Link to={href("live", agent)}>Live feed</Link>
        <Link to={href("spend", agent)}>Spend</Link>
        <Link to={href("protocols", agent)}>Protocols</Link>
        <Link to={href("policies", agent)}>Policies</Link>
        <Link to={href("ledger", agent)}>Ledger</Link>
        <Link to={href("runs", agent)}>Runs</Link>
        <Link to={href("channels", agent)}>Channels</Link>
      </nav>
      {error !== undefined ? <ErrorBox error={error} /> : null}
      {data == null ? (
        fetching ? (
          <Loading what="the agent" />
        ) : null
      ) : (
        <dl className="facts" data-testid="agent-facts">
          <dt>Wallet</dt>
          <dd>
            <code className="address">{data.wallet.address}</code> on {data.wallet.network}
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
    </section>
  );
}
