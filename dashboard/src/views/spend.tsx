/**
 * Spend (spec 4.9): by agent, protocol and domain over a time window (1h, 24h, 7d, 30d, custom),
 * with the totals of `spendSummary` and a chart of spend over time (`metrics`). Every figure is the
 * API's exact decimal text.
 */
import { type ReactNode, useEffect, useMemo, useState } from "react";
import { Pager } from "../components/pager";
import { Truncated } from "../components/truncated";
import { useQuery } from "urql";
import { type ChartSeries, TimeChart } from "../components/chart";
import { AgentFilter, readResolution, useViewWindow, type ViewWindow, WindowPicker, windowVariables } from "../components/filters";
import { Empty, TableState } from "../components/states";
import { DataTable } from "../components/table";
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
  const [offset, setOffset] = useState(0);
  const shown = rows.slice(offset, offset + SHARE_PAGE);
  return (
    <div className="table-wrap">
      <DataTable
        testId={`spend-by-${head.toLowerCase()}`}
        className="data compact shares"
        wrap={false}
        caption={caption}
        columns={[
          { head, width: "" },
          { head: "Amount (USDC)", width: "w-amount", num: true },
          { head: "Share", width: "w-share", num: true },
          { head: "Payments", width: "w-count", num: true },
        ]}
      >
        {rows.length === 0 ? (
          <tr>
            <td colSpan={4} className="muted">
              None in this window
            </td>
          </tr>
        ) : (
          shown.map((row) => (
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
      </DataTable>
      <Pager label={`${caption}: pages`} offset={offset} size={SHARE_PAGE} shown={shown.length} total={rows.length} onPage={setOffset} />
    </div>
  );
}

/** Rows of a share table per page (an account can have thousands of agents). */
const SHARE_PAGE = 10;

export function SpendView({ params }: { params: URLSearchParams }): ReactNode {
  const agentId = params.get("agent");
  const window = useViewWindow(params, agentId);
  return <SpendViewIn params={params} agentId={agentId} window={window} />;
}

function SpendViewIn({ params, agentId, window }: { params: URLSearchParams; agentId: string | null; window: ViewWindow }): ReactNode {
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
      <TableState what="spend" error={error} fetching={fetching} loaded={summary !== undefined} refetch={refetch}>
        {summary === undefined ? null : (
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
                rows={summary.byDomain.map((s) => ({ key: s.domain, label: <Truncated text={s.domain} className="endpoint" />, share: s }))}
              />
            </div>
          </>
        )}
      </TableState>
    </section>
  );
}
