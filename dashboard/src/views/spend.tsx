/**
 * Spend (spec 4.9): by agent, protocol and domain over a time window (1h, 24h, 7d, 30d, custom),
 * with the totals of `spendSummary` and a chart of spend over time (`metrics`). Every figure is the
 * API's exact decimal text.
 */
import { type ReactNode, useEffect, useMemo } from "react";
import { useQuery } from "urql";
import { type ChartSeries, TimeChart } from "../components/chart";
import { AgentFilter, readResolution, readWindow, WindowPicker, windowVariables } from "../components/filters";
import { Empty, ErrorBox, Loading } from "../components/states";
import { AgentLink, Amount, ProtocolBadge, Time } from "../components/values";
import { type MetricsData, SPEND, type Share, type SpendSummaryData, type WindowVariables } from "../graphql/queries";
import { markOnce } from "../perf";

function ShareTable({
  caption,
  head,
  rows,
}: {
  caption: string;
  head: string;
  rows: { key: string; label: ReactNode; share: Share }[];
}): ReactNode {
  return (
    <table className="data compact" data-testid={`spend-by-${head.toLowerCase()}`}>
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">{head}</th>
          <th scope="col" className="num">
            Amount (USDC)
          </th>
          <th scope="col" className="num">
            Share
          </th>
          <th scope="col" className="num">
            Payments
          </th>
        </tr>
      </thead>
      <tbody>
        {rows.length === 0 ? (
          <tr>
            <td colSpan={4} className="muted">
              None in this window
            </td>
          </tr>
        ) : (
          rows.map((row) => (
            <tr key={row.key} data-key={row.key}>
              <th scope="row">{row.label}</th>
              <td className="num">
                <Amount value={row.share.amount} />
              </td>
              <td className="num">{row.share.percent} %</td>
              <td className="num">{row.share.txCount}</td>
            </tr>
          ))
        )}
      </tbody>
    </table>
  );
}

export function SpendView({ params }: { params: URLSearchParams }): ReactNode {
  const agentId = params.get("agent");
  const window = readWindow(params, "24h");
  const resolution = readResolution(params, window);
  const variables: WindowVariables = { agentId, ...windowVariables(window), resolution };
  const [{ data, fetching, error }, refetch] = useQuery<SpendSummaryData & MetricsData, WindowVariables>({ query: SPEND, variables });
  const summary = data?.spendSummary;
  const spend = data?.metrics.metrics.spend ?? null;
  const timestamps = useMemo(() => spend?.map((p) => p.timestamp) ?? [], [spend]);
  const series = useMemo<ChartSeries[]>(
    () => [{ label: "Spend", units: spend?.map((p) => p.valueUnits) ?? [], color: "#2563eb" }],
    [spend],
  );
  useEffect(() => {
    if (summary !== undefined) markOnce("apg:spend-summary");
  }, [summary]);

  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Spend</h1>
      <div className="filters">
        <AgentFilter value={agentId} />
        <WindowPicker value={window} />
      </div>
      {error !== undefined ? <ErrorBox error={error} retry={() => refetch({ requestPolicy: "network-only" })} /> : null}
      {summary === undefined ? (
        fetching ? (
          <Loading what="spend" />
        ) : null
      ) : (
        <>
          <div className="totals" data-testid="spend-totals">
            <div className="total">
              <span className="label">Total spend</span>
              <span className="value" data-testid="spend-total">
                <Amount value={summary.total} unit />
              </span>
            </div>
            <div className="total">
              <span className="label">Payments</span>
              <span className="value" data-testid="spend-count">
                {summary.txCount}
              </span>
            </div>
            <div className="total">
              <span className="label">Window</span>
              <span className="value small">
                <Time iso={summary.from} /> → <Time iso={summary.to} />
              </span>
            </div>
          </div>
          {summary.txCount === 0 ? <Empty>No payments in this window.</Empty> : null}
          <TimeChart
            title={`Spend per ${resolution}`}
            timestamps={timestamps}
            series={series}
            mark="apg:spend-chart"
            testId="spend-chart"
            bars
          />
          <div className="grid-3">
            <ShareTable
              caption="By agent"
              head="Agent"
              rows={summary.byAgent.map((s) => ({ key: s.agentId, label: <AgentLink agentId={s.agentId} />, share: s }))}
            />
            <ShareTable
              caption="By protocol"
              head="Protocol"
              rows={summary.byProtocol.map((s) => ({ key: s.protocol, label: <ProtocolBadge protocol={s.protocol} />, share: s }))}
            />
            <ShareTable
              caption="By domain"
              head="Domain"
              rows={summary.byDomain.map((s) => ({ key: s.domain, label: <span className="endpoint">{s.domain}</span>, share: s }))}
            />
          </div>
        </>
      )}
    </section>
  );
}
