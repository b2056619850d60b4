/**
 * A time-series chart (uPlot on a canvas) with its numbers as a table beside it: the canvas is
 * for the eye, the table (and the legend while hovering) gives every exact amount. Amounts are
 * plotted from base units as numbers only to place points; every value shown is the API's exact
 * decimal text. When the chart has drawn, its figure gets `data-chart-drawn` and the page a
 * performance mark (the dashboard bench reads it).
 */
import { type ReactNode, useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { formatAmount, unitsForPlot, unitsToDecimal } from "../money";
import { markOnce } from "../perf";
import { localTime, utcTime } from "../time";

export interface ChartSeries {
  readonly label: string;
  /** Base units per bucket, as the API gives them. */
  readonly units: readonly string[];
  readonly color: string;
}

export interface TimeChartProps {
  /** Accessible name of the chart (and its table's caption). */
  readonly title: string;
  /** Bucket starts, ISO UTC. */
  readonly timestamps: readonly string[];
  readonly series: readonly ChartSeries[];
  /** Performance mark set when first drawn. */
  readonly mark?: string;
  readonly testId?: string;
  /** Bars (one per bucket) instead of lines. */
  readonly bars?: boolean;
}

const HEIGHT = 260;

export function TimeChart({ title, timestamps, series, mark, testId, bars }: TimeChartProps): ReactNode {
  const host = useRef<HTMLDivElement>(null);
  const figure = useRef<HTMLElement>(null);

  useEffect(() => {
    const element = host.current;
    if (element === null) return;
    const xs = timestamps.map((iso) => new Date(iso).getTime() / 1000);
    const data: uPlot.AlignedData = [xs, ...series.map((s) => s.units.map((u) => unitsForPlot(u)))];
    const exact = (seriesIndex: number, index: number | null): string => {
      if (index === null) return "—";
      const units = series[seriesIndex - 1]?.units[index];
      return units === undefined ? "—" : formatAmount(unitsToDecimal(units));
    };
    const options: uPlot.Options = {
      width: Math.max(320, element.clientWidth),
      height: HEIGHT,
      series: [
        { label: "Time", value: (_u, _v, _s, index) => (index === null ? "—" : localTime(timestamps[index] ?? "")) },
        ...series.map((s, i) => ({
          label: `${s.label} (USDC)`,
          stroke: s.color,
          fill: `${s.color}22`,
          width: 2,
          points: { show: bars !== true && timestamps.length <= 60 },
          ...(bars === true ? { paths: uPlot.paths.bars!({ size: [0.8, 40] }), fill: s.color } : {}),
          value: (_u: uPlot, _v: number, _s: number, index: number | null) => exact(i + 1, index),
        })),
      ],
      axes: [{}, { values: (_u, ticks) => ticks.map((t) => formatAmount(t.toFixed(6))), size: 70 }],
      scales: { y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      cursor: { drag: { x: false, y: false } },
      hooks: {
        draw: [
          () => {
            figure.current?.setAttribute("data-chart-drawn", "true");
            if (mark !== undefined) markOnce(mark);
          },
        ],
      },
    };
    const plot = new uPlot(options, data, element);
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(320, element.clientWidth), height: HEIGHT }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [timestamps, series, mark, bars]);

  const rows = timestamps
    .map((iso, index) => ({ iso, values: series.map((s) => s.units[index] ?? "0") }))
    .filter((row) => row.values.some((v) => v !== "0"));

  return (
    <figure className="chart" ref={figure} data-testid={testId}>
      <figcaption>{title}</figcaption>
      <div ref={host} role="img" aria-label={`${title}: chart; the same numbers are in the table below`} />
      <details>
        <summary>Show the numbers ({rows.length} non-empty buckets)</summary>
        <table>
          <caption className="visually-hidden">{title}</caption>
          <thead>
            <tr>
              <th scope="col">Bucket start</th>
              {series.map((s) => (
                <th scope="col" key={s.label} className="num">
                  {s.label} (USDC)
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.iso}>
                <td>
                  <time dateTime={row.iso} title={utcTime(row.iso)}>
                    {localTime(row.iso)}
                  </time>
                </td>
                {row.values.map((units, i) => (
                  <td key={series[i]!.label} className="num">
                    {formatAmount(unitsToDecimal(units))}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}
