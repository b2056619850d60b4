/** Labelled filter controls shared by the views; each writes its value into the URL's query. */
import { type KeyboardEvent, type ReactNode, useEffect, useId, useMemo, useState } from "react";
import { useQuery } from "urql";
import { ACTIVITY, type ActivityData, AGENT_OPTIONS, type AgentListData, type AgentListVariables } from "../graphql/queries";
import { setParams } from "../router";
import { isoToLocalInput, localInputToIso, viewerZone } from "../time";

/** A text filter written into the URL on Enter or when it loses focus. */
export function TextFilter({
  label,
  name,
  value,
  placeholder,
}: {
  label: string;
  name: string;
  value: string | null;
  placeholder: string;
}): ReactNode {
  const id = useId();
  const [text, setText] = useState(value ?? "");
  useEffect(() => setText(value ?? ""), [value]);
  return (
    <form
      className="field"
      onSubmit={(event) => {
        event.preventDefault();
        setParams({ [name]: text.trim() });
      }}
    >
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        type="text"
        value={text}
        placeholder={placeholder}
        onChange={(event) => setText(event.target.value)}
        onBlur={() => setParams({ [name]: text.trim() })}
      />
    </form>
  );
}

/** A select filter written into the URL. */
export function SelectFilter({
  label,
  name,
  value,
  options,
}: {
  label: string;
  name: string;
  value: string | null;
  options: readonly [string, string][];
}): ReactNode {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value ?? ""} onChange={(event) => setParams({ [name]: event.target.value })}>
        {options.map(([optionValue, text]) => (
          <option key={optionValue} value={optionValue}>
            {text}
          </option>
        ))}
      </select>
    </div>
  );
}

const OPTION_COUNT = 20;

/**
 * The agent filter: a searchable combobox (WAI-ARIA combobox pattern with a list box popup) over
 * the account's agents, asking the API for the first matches of what is typed, so it serves
 * 10,000 agents as well as 10. Arrow keys move through the options, Enter picks, Escape closes;
 * "All agents" clears the filter. The choice is written into the URL (`?agent=`).
 */
export function AgentFilter({ value }: { value: string | null }): ReactNode {
  const id = useId();
  const [text, setText] = useState(value ?? "");
  const [open, setOpen] = useState(false);
  const [active, setActive] = useState(0);
  const [search, setSearch] = useState("");
  useEffect(() => setText(value ?? ""), [value]);
  useEffect(() => {
    const timer = setTimeout(() => setSearch(text.trim() === (value ?? "") ? "" : text.trim()), 150);
    return () => clearTimeout(timer);
  }, [text, value]);
  const [{ data, fetching }] = useQuery<AgentListData, AgentListVariables>({
    query: AGENT_OPTIONS,
    variables: { search: search === "" ? null : search, first: OPTION_COUNT },
    pause: !open,
  });
  const agents = data?.agentList.nodes ?? [];
  const total = data?.agentList.totalCount ?? 0;
  const options: { value: string; label: string }[] = [
    { value: "", label: "All agents" },
    ...agents.map((agent) => ({ value: agent.agentId, label: agent.archivedAt ? `${agent.agentId} (archived)` : agent.agentId })),
  ];
  const choose = (chosen: string): void => {
    setOpen(false);
    setText(chosen);
    setParams({ agent: chosen });
  };
  const onKeyDown = (event: KeyboardEvent<HTMLInputElement>): void => {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      if (!open) {
        setOpen(true);
        setActive(0);
        return;
      }
      const step = event.key === "ArrowDown" ? 1 : -1;
      setActive((current) => (current + step + options.length) % options.length);
    } else if (event.key === "Enter") {
      if (open && options[active] !== undefined) {
        event.preventDefault();
        choose(options[active]!.value);
      }
    } else if (event.key === "Escape") {
      if (open) {
        event.preventDefault();
        setOpen(false);
      } else {
        setText(value ?? "");
      }
    }
  };
  const listId = `${id}-list`;
  const optionId = (index: number): string => `${id}-option-${index}`;
  return (
    <div className="field combobox">
      <label htmlFor={id}>Agent</label>
      <input
        id={id}
        type="text"
        role="combobox"
        aria-expanded={open}
        aria-controls={listId}
        aria-autocomplete="list"
        aria-activedescendant={open && options[active] !== undefined ? optionId(active) : undefined}
        autoComplete="off"
        spellCheck={false}
        placeholder="All agents"
        value={text}
        title={value ?? undefined}
        data-testid="agent-filter"
        onChange={(event) => {
          setText(event.target.value);
          setOpen(true);
          setActive(0);
        }}
        onFocus={() => setOpen(false)}
        onClick={() => setOpen(true)}
        onKeyDown={onKeyDown}
        onBlur={() => {
          setOpen(false);
          setText(value ?? "");
        }}
      />
      <div className="combobox-popup" hidden={!open}>
        <div id={listId} role="listbox" aria-label="Agents" className="combobox-list">
          {options.map((option, index) => (
            <div
              key={option.value === "" ? "(all)" : option.value}
              id={optionId(index)}
              role="option"
              tabIndex={-1}
              aria-selected={index === active}
              className={index === active ? "active" : undefined}
              title={option.label}
              onMouseDown={(event) => {
                event.preventDefault();
                choose(option.value);
              }}
            >
              {option.label}
            </div>
          ))}
        </div>
        {data !== undefined && total > agents.length ? (
          <p className="muted combobox-more">{(total - agents.length).toLocaleString("en-GB")} more: type to narrow</p>
        ) : null}
        {fetching && data === undefined ? <p className="muted combobox-more">Loading agents…</p> : null}
      </div>
    </div>
  );
}

export const WINDOWS = ["1h", "24h", "7d", "30d"] as const;

/** The time window of a view: a named window, a custom range from the query string, or "auto". */
export interface ViewWindow {
  readonly window: string | null;
  readonly range: { readonly from: string; readonly to: string } | null;
  readonly lengthMs: number;
  /** Chosen from the data (no window in the URL, or `window=auto`). */
  readonly auto?: boolean;
}

const WINDOW_MS: Record<string, number> = { "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000, "30d": 30 * 86_400_000 };
const HOUR_MS = 3_600_000;

/** The window the URL names; null when it names none (or `auto`): the view then adapts it to the data. */
export function readWindow(params: URLSearchParams): ViewWindow | null {
  const from = params.get("from");
  const to = params.get("to");
  if (params.get("window") === "custom" && from !== null && to !== null) {
    const length = new Date(to).getTime() - new Date(from).getTime();
    if (Number.isFinite(length) && length > 0) return { window: null, range: { from, to }, lengthMs: length };
  }
  const named = params.get("window");
  return named !== null && named in WINDOW_MS ? { window: named, range: null, lengthMs: WINDOW_MS[named]! } : null;
}

/**
 * The window fitted to the data: from the start of the first hour with a payment in the last 30
 * days to the end of the current minute (at least an hour; 30d when the activity spans it all;
 * 24h when there is none), so a chart is never one bar at the far right of an empty range.
 */
export function fitWindow(hourlyCounts: readonly { timestamp: string; count: number }[], now: Date): ViewWindow {
  const first = hourlyCounts.find((point) => point.count > 0);
  if (first === undefined) return { window: "24h", range: null, lengthMs: WINDOW_MS["24h"]!, auto: true };
  const to = Math.floor(now.getTime() / 60_000) * 60_000 + 60_000;
  const from = Math.min(new Date(first.timestamp).getTime(), to - HOUR_MS);
  if (to - from >= WINDOW_MS["30d"]! - HOUR_MS) return { window: "30d", range: null, lengthMs: WINDOW_MS["30d"]!, auto: true };
  return { window: null, range: { from: new Date(from).toISOString(), to: new Date(to).toISOString() }, lengthMs: to - from, auto: true };
}

/** The fitted window's widest case, shown while the activity is read (no second wait when it is the answer). */
const AUTO_30D: ViewWindow = { window: "30d", range: null, lengthMs: WINDOW_MS["30d"]!, auto: true };

/**
 * The view's window: the URL's, else fitted to the account's (or the agent's) activity. While the
 * activity is read, the view already reads the 30-day window: when the activity spans it (an
 * account in use) that is the answer and nothing is read twice; otherwise the view narrows.
 */
export function useViewWindow(params: URLSearchParams, agentId: string | null): ViewWindow {
  const named = readWindow(params);
  const [{ data }] = useQuery<ActivityData>({ query: ACTIVITY, variables: { agentId }, pause: named !== null });
  const points = data?.metrics.metrics.tx_count ?? null;
  const fitted = useMemo(() => (points === null ? null : fitWindow(points, new Date())), [points]);
  return named ?? fitted ?? AUTO_30D;
}

/** Named windows as radio buttons, and "Custom" with two datetime inputs in the viewer's zone. */
export function WindowPicker({ value }: { value: ViewWindow }): ReactNode {
  const id = useId();
  const custom = value.range !== null && value.auto !== true;
  const now = new Date();
  const [from, setFrom] = useState(
    value.range && value.auto !== true
      ? isoToLocalInput(new Date(value.range.from))
      : isoToLocalInput(new Date(now.getTime() - 86_400_000)),
  );
  const [to, setTo] = useState(value.range && value.auto !== true ? isoToLocalInput(new Date(value.range.to)) : isoToLocalInput(now));
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
        <label>
          <input
            type="radio"
            name={`${id}-window`}
            value="auto"
            checked={!showCustom && value.auto === true}
            onChange={() => {
              setShowCustom(false);
              setParams({ window: "auto", from: null, to: null });
            }}
          />
          Auto
        </label>
        {WINDOWS.map((w) => (
          <label key={w}>
            <input
              type="radio"
              name={`${id}-window`}
              value={w}
              checked={!showCustom && value.auto !== true && value.window === w}
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
