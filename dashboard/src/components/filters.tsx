/** Labelled filter controls shared by the views; each writes its value into the URL's query. */
import { type ReactNode, useId, useState } from "react";
import { useQuery } from "urql";
import { AGENT_IDS, type AgentsData } from "../graphql/queries";
import { setParams } from "../router";
import { isoToLocalInput, localInputToIso, viewerZone } from "../time";

export function AgentFilter({ value }: { value: string | null }): ReactNode {
  const id = useId();
  const [{ data }] = useQuery<AgentsData>({ query: AGENT_IDS });
  const agents = data?.agents ?? [];
  return (
    <div className="field">
      <label htmlFor={id}>Agent</label>
      <select id={id} value={value ?? ""} onChange={(event) => setParams({ agent: event.target.value })}>
        <option value="">All agents</option>
        {value !== null && !agents.some((a) => a.agentId === value) ? <option value={value}>{value}</option> : null}
        {agents.map((agent) => (
          <option key={agent.agentId} value={agent.agentId}>
            {agent.agentId}
            {agent.archivedAt ? " (archived)" : ""}
          </option>
        ))}
      </select>
    </div>
  );
}

export const WINDOWS = ["1h", "24h", "7d", "30d"] as const;

/** The time window of a view: a named window, or a custom range from the query string. */
export interface ViewWindow {
  readonly window: string | null;
  readonly range: { readonly from: string; readonly to: string } | null;
  readonly lengthMs: number;
}

const WINDOW_MS: Record<string, number> = { "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000, "30d": 30 * 86_400_000 };

export function readWindow(params: URLSearchParams, fallback: (typeof WINDOWS)[number]): ViewWindow {
  const from = params.get("from");
  const to = params.get("to");
  if (params.get("window") === "custom" && from !== null && to !== null) {
    const length = new Date(to).getTime() - new Date(from).getTime();
    if (Number.isFinite(length) && length > 0) return { window: null, range: { from, to }, lengthMs: length };
  }
  const named = params.get("window");
  const window = named !== null && named in WINDOW_MS ? named : fallback;
  return { window, range: null, lengthMs: WINDOW_MS[window]! };
}

/** Named windows as radio buttons, and "Custom" with two datetime inputs in the viewer's zone. */
export function WindowPicker({ value }: { value: ViewWindow }): ReactNode {
  const id = useId();
  const custom = value.range !== null;
  const now = new Date();
  const [from, setFrom] = useState(
    value.range ? isoToLocalInput(new Date(value.range.from)) : isoToLocalInput(new Date(now.getTime() - 86_400_000)),
  );
  const [to, setTo] = useState(value.range ? isoToLocalInput(new Date(value.range.to)) : isoToLocalInput(now));
  const [showCustom, setShowCustom] = useState(custom);
  const apply = (): void => {
    const fromIso = localInputToIso(from);
    const toIso = localInputToIso(to);
    if (fromIso !== null && toIso !== null) setParams({ window: "custom", from: fromIso, to: toIso });
  };
  return (
    <fieldset className="field window-picker">
      <legend>Time window</legend>
      <div className="segmented">
        {WINDOWS.map((w) => (
          <label key={w}>
            <input
              type="radio"
              name={`${id}-window`}
              value={w}
              checked={!showCustom && value.window === w}
              onChange={() => {
                setShowCustom(false);
                setParams({ window: w, from: null, to: null });
              }}
            />
            {w}
          </label>
        ))}
        <label>
          <input type="radio" name={`${id}-window`} value="custom" checked={showCustom} onChange={() => setShowCustom(true)} />
          Custom
        </label>
      </div>
      {showCustom ? (
        <div className="custom-range">
          <label>
            From
            <input type="datetime-local" value={from} onChange={(event) => setFrom(event.target.value)} />
          </label>
          <label>
            To
            <input type="datetime-local" value={to} onChange={(event) => setTo(event.target.value)} />
          </label>
          <button type="button" onClick={apply}>
            Apply range
          </button>
          <span className="muted">times in {viewerZone()}</span>
        </div>
      ) : null}
    </fieldset>
  );
}

/** Bucket sizes the metrics API takes, and the default for a window length (at most 1440 buckets). */
export const RESOLUTIONS: readonly { label: string; ms: number }[] = [
  { label: "1m", ms: 60_000 },
  { label: "5m", ms: 300_000 },
  { label: "15m", ms: 900_000 },
  { label: "1h", ms: 3_600_000 },
  { label: "6h", ms: 21_600_000 },
  { label: "1d", ms: 86_400_000 },
];

export function allowedResolutions(lengthMs: number): typeof RESOLUTIONS {
  return RESOLUTIONS.filter((r) => lengthMs / r.ms <= 1440 && lengthMs / r.ms >= 1);
}

export function defaultResolution(lengthMs: number): string {
  const target = allowedResolutions(lengthMs).find((r) => lengthMs / r.ms <= 200);
  return target?.label ?? allowedResolutions(lengthMs).at(-1)?.label ?? "1h";
}

export function readResolution(params: URLSearchParams, window: ViewWindow): string {
  const asked = params.get("resolution");
  return asked !== null && allowedResolutions(window.lengthMs).some((r) => r.label === asked) ? asked : defaultResolution(window.lengthMs);
}

export function ResolutionSelect({ value, window }: { value: string; window: ViewWindow }): ReactNode {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>Resolution</label>
      <select id={id} value={value} onChange={(event) => setParams({ resolution: event.target.value })}>
        {allowedResolutions(window.lengthMs).map((r) => (
          <option key={r.label} value={r.label}>
            {r.label}
          </option>
        ))}
      </select>
    </div>
  );
}

/** The window as GraphQL variables. */
export function windowVariables(window: ViewWindow): { window: string | null; range: { from: string; to: string } | null } {
  return window.range === null ? { window: window.window, range: null } : { window: null, range: window.range };
}
