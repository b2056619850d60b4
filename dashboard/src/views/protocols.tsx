/**
 * Protocols (spec 4.9): x402 versus MPP volume over time, at a chosen resolution, with each
 * protocol's share of the window's volume (`metrics`: spend points carry x402Units / mppUnits).
 */
import { type ReactNode, useMemo } from "react";
import { useQuery } from "urql";
import { type ChartSeries, TimeChart } from "../components/chart";
import {
  AgentFilter,
  ResolutionSelect,
  readResolution,
  useViewWindow,
  type ViewWindow,
  WindowPicker,
  windowVariables,
} from "../components/filters";
import { Empty, TableState } from "../components/states";
import { DataTable } from "../components/table";
import { Amount } from "../components/values";
import { type MetricsData, PROTOCOLS, type WindowVariables } from "../graphql/queries";
import { percentOf, sumUnits, unitsToDecimal } from "../money";

export function ProtocolsView({ params }: { params: URLSearchParams }): ReactNode {
  const agentId = params.get("agent");
  const window = useViewWindow(params, agentId);
  return <ProtocolsViewIn params={params} agentId={agentId} window={window} />;
}

function ProtocolsViewIn({ params, agentId, window }: { params: URLSearchParams; agentId: string | null; window: ViewWindow }): ReactNode {
  const resolution = readResolution(params, window);
  const variables: WindowVariables = { agentId, ...windowVariables(window), resolution };
  const [{ data, fetching, error }, refetch] = useQuery<MetricsData, WindowVariables>({ query: PROTOCOLS, variables });
  const metrics = data?.metrics;
  const spend = metrics?.metrics.spend ?? null;
  const split = metrics?.metrics.protocol_split ?? null;
  const timestamps = useMemo(() => spend?.map((p) => p.timestamp) ?? [], [spend]);
  const series = useMemo<ChartSeries[]>(
    () => [
      { label: "x402", units: spend?.map((p) => p.x402Units) ?? [], color: "#2563eb" },
      { label: "MPP", units: spend?.map((p) => p.mppUnits) ?? [], color: "#d97706" },
    ],
    [spend],
  );
  const x402 = split === null ? 0n : BigInt(split.x402Units);
  const mpp = split === null ? 0n : BigInt(split.mppUnits);
  const volume = sumUnits([x402, mpp]);

  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Protocols</h1>
      <div className="filters">
        <AgentFilter value={agentId} />
        <WindowPicker value={window} />
        <ResolutionSelect value={resolution} window={window} />
      </div>
      <TableState what="protocol volume" error={error} fetching={fetching} loaded={metrics !== undefined} refetch={refetch}>
        {metrics === undefined ? null : (
          <>
            <DataTable
              testId="protocol-split"
              className="data compact split"
              wrap={false}
              caption="Volume by protocol in this window"
              columns={[{ head: "Protocol" }, { head: "Volume (USDC)", num: true }, { head: "Share", num: true }]}
            >
              {(
                [
                  ["x402", "x402", x402],
                  ["mpp", "MPP", mpp],
                ] as const
              ).map(([key, name, units]) => (
                <tr key={key} data-key={key}>
                  <th scope="row">{name}</th>
                  <td className="num">
                    <Amount value={unitsToDecimal(units)} />
                  </td>
                  <td className="num">{percentOf(units, volume)} %</td>
                </tr>
              ))}
            </DataTable>
            {volume === 0n ? <Empty>No x402 or MPP volume in this window.</Empty> : null}
            <TimeChart
              title={`x402 and MPP volume per ${resolution}`}
              timestamps={timestamps}
              series={series}
              mark="apg:protocols-chart"
              testId="protocols-chart"
            />
          </>
        )}
      </TableState>
    </section>
  );
}
