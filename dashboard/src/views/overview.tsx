/**
 * Overview, the landing page: whether anything needs attention, at a glance. Today's spend and
 * payments against yesterday by the same time, agents whose daily budget is over 80 % or
 * exhausted, rejections in the last hour by reason, webhook deliveries failing, and how far the
 * indexer is. Each card links to the view that explains it. One GraphQL request (`OVERVIEW`).
 */
import { type ReactNode, useEffect, useMemo } from "react";
import { useQuery } from "urql";
import { Link } from "../components/link";
import { TableState } from "../components/states";
import { AgentLink, Amount, Time } from "../components/values";
import { OVERVIEW, type OverviewData, type OverviewVariables } from "../graphql/queries";
import { unitsToDecimal } from "../money";
import { markOnce } from "../perf";
import { href } from "../router";
import { REASONS } from "./policies";

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** The indexer is called behind when it has not committed for this long while payments keep coming. */
const INDEXER_STALE_S = 60;

/** Today (local midnight to the end of this minute) and yesterday over the same hours. */
export function dayRanges(now: Date): OverviewVariables {
  const midnight = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime();
  const to = Math.floor(now.getTime() / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
  const iso = (ms: number): string => new Date(ms).toISOString();
  return { today: { from: iso(midnight), to: iso(to) }, yesterday: { from: iso(midnight - DAY_MS), to: iso(to - DAY_MS) } };
}

/** "+12.5 % vs yesterday by now", "−0.3 % …", "same …", comparing exact integers (tenths of a percent, toward zero). */
function change(today: bigint, yesterday: bigint): string {
  if (yesterday === 0n) return today === 0n ? "same as yesterday by now" : "none yesterday by now";
  const diff = today - yesterday;
  if (diff === 0n) return "same as yesterday by now";
  const tenths = ((diff < 0n ? -diff : diff) * 1000n) / yesterday;
  return `${diff > 0n ? "+" : "−"}${tenths / 10n}.${tenths % 10n} % vs yesterday by now`;
}

function Card({
  title,
  to,
  linkText,
  tone,
  testId,
  children,
}: {
  title: string;
  to: string;
  linkText: string;
  tone: "ok" | "attention" | "neutral";
  testId: string;
  children: ReactNode;
}): ReactNode {
  return (
    <article className={`card card-${tone}`} data-testid={testId} data-tone={tone} aria-labelledby={`${testId}-title`}>
      <h2 id={`${testId}-title`}>{title}</h2>
      {children}
      <p className="card-link">
        <Link to={to}>{linkText} →</Link>
      </p>
    </article>
  );
}

export function OverviewView(): ReactNode {
  const variables = useMemo(() => dayRanges(new Date()), []);
  const [{ data, fetching, error }, refetch] = useQuery<OverviewData, OverviewVariables>({ query: OVERVIEW, variables });
  useEffect(() => {
    if (data !== undefined) markOnce("apg:overview-cards");
  }, [data]);
  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Overview</h1>
      <TableState what="the overview" error={error} fetching={fetching} loaded={data !== undefined} refetch={refetch}>
        {data === undefined ? null : (
          <div data-testid="overview" data-today={JSON.stringify(variables.today)} data-yesterday={JSON.stringify(variables.yesterday)}>
            <Cards data={data} />
          </div>
        )}
      </TableState>
    </section>
  );
}

function Cards({ data }: { data: OverviewData }): ReactNode {
  const today = BigInt(data.today.totalUnits);
  const yesterday = BigInt(data.yesterday.totalUnits);
  const budgets = data.budgetUse;
  const attentionBudgets = budgets.warningCount + budgets.exhaustedCount;
  const rejections = data.rejectionCounts.reduce((sum, r) => sum + r.count, 0);
  const webhooks = data.webhookHealth;
  const indexer = data.indexerStatus;
  const indexerBehind = indexer !== null && indexer.secondsSinceCheckpoint > INDEXER_STALE_S;
  return (
    <div className="cards">
      <Card title="Spend today" to={href("spend", { window: "24h" })} linkText="Spend" tone="neutral" testId="card-spend">
        <p className="card-figure" data-testid="today-spend">
          <Amount value={data.today.total} unit />
        </p>
        <p className="muted">
          {change(today, yesterday)} (<Amount value={unitsToDecimal(yesterday)} unit />)
        </p>
      </Card>
      <Card title="Payments today" to={href("ledger")} linkText="Ledger" tone="neutral" testId="card-payments">
        <p className="card-figure" data-testid="today-count">
          {data.today.txCount.toLocaleString("en-GB")}
        </p>
        <p className="muted" data-testid="yesterday-count" data-count={data.yesterday.txCount}>
          {change(BigInt(data.today.txCount), BigInt(data.yesterday.txCount))} ({data.yesterday.txCount.toLocaleString("en-GB")})
        </p>
      </Card>
      <Card
        title="Daily budgets"
        to={href("policies", { state: budgets.exhaustedCount > 0 ? "exhausted" : attentionBudgets > 0 ? "warning" : null })}
        linkText="Budget use per agent"
        tone={attentionBudgets > 0 ? "attention" : "ok"}
        testId="card-budgets"
      >
        <p className="card-figure">
          <span data-testid="budget-exhausted-count">{budgets.exhaustedCount.toLocaleString("en-GB")}</span> exhausted ·{" "}
          <span data-testid="budget-warning-count">{budgets.warningCount.toLocaleString("en-GB")}</span> over 80 %
        </p>
        {attentionBudgets > 0 ? (
          <ul className="plain card-list">
            {budgets.nodes
              .filter((row) => row.budgetState !== "open")
              .map((row) => (
                <li key={row.agentId}>
                  <AgentLink agentId={row.agentId} /> <span className="num">{row.percent} %</span>
                </li>
              ))}
          </ul>
        ) : (
          <p className="muted">of {budgets.totalCount.toLocaleString("en-GB")} agents with a daily budget</p>
        )}
      </Card>
      <Card
        title="Rejections in the last hour"
        to={href("policies")}
        linkText="Rejected payments"
        tone={rejections > 0 ? "attention" : "ok"}
        testId="card-rejections"
      >
        <p className="card-figure" data-testid="rejections-hour">
          {rejections.toLocaleString("en-GB")}
        </p>
        <ul className="plain card-list" data-testid="rejections-by-reason">
          {data.rejectionCounts.map((row) => (
            <li key={row.reasonCode} data-reason={row.reasonCode} data-count={row.count}>
              <Link to={href("policies", { reason: row.reasonCode })}>{REASONS[row.reasonCode] ?? row.reasonCode}</Link>:{" "}
              {row.count.toLocaleString("en-GB")}
            </li>
          ))}
        </ul>
      </Card>
      <Card
        title="Webhook deliveries failing"
        to={href("live")}
        linkText="Live feed"
        tone={webhooks.failed + webhooks.retrying > 0 ? "attention" : "ok"}
        testId="card-webhooks"
      >
        <p className="card-figure">
          <span data-testid="webhooks-failed">{webhooks.failed}</span> failed ·{" "}
          <span data-testid="webhooks-retrying">{webhooks.retrying}</span> retrying
        </p>
        <p className="muted">
          in the last 24 h
          {webhooks.lastError !== null ? (
            <>
              ; last error: <span title={webhooks.lastError}>{webhooks.lastError}</span>
            </>
          ) : null}
          . Endpoints and retries: GET /v1/webhooks.
        </p>
      </Card>
      <Card title="Indexer" to={href("live")} linkText="Live feed" tone={indexerBehind ? "attention" : "ok"} testId="card-indexer">
        {indexer === null ? (
          <p className="card-figure">not started</p>
        ) : (
          <>
            <p className="card-figure" data-testid="indexer-lag" data-seconds={indexer.secondsSinceCheckpoint}>
              {indexer.secondsSinceCheckpoint.toLocaleString("en-GB")} s since its last commit
            </p>
            <p className="muted">
              slot <span data-testid="indexer-slot">{indexer.slot}</span>
              {indexer.latestPaymentAt !== null ? (
                <>
                  ; newest payment <Time iso={indexer.latestPaymentAt} />
                </>
              ) : null}
            </p>
          </>
        )}
      </Card>
    </div>
  );
}
