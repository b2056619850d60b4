/**
 * The backtest panel of the policies view (one agent chosen): a candidate policy as JSON (the form
 * `PUT /v1/policies/{agentId}` takes; an omitted field is no limit) and a window; run, it shows
 * what the candidate would have done to the agent's recorded payments (`Query.simulatePolicy`):
 * totals, refusals by rule and by domain, and the payments, oldest first. Nothing is stored.
 */
import { type FormEvent, type ReactNode, useState } from "react";
import { useQuery } from "urql";
import { TableState } from "../components/states";
import { DataTable } from "../components/table";
import { Truncated } from "../components/truncated";
import { Amount, Time } from "../components/values";
import {
  type PolicySimulationData,
  type PolicySimulationVariables,
  SIMULATE_POLICY,
  type SimulatedOutcome,
  type SimulationCount,
} from "../graphql/queries";

const WINDOWS = ["24h", "7d", "30d", "90d"] as const;
/** Payments listed under the totals (the totals cover every one). */
const LISTED = 200;
const EXAMPLE = '{\n  "dailyBudget": { "usdc": 5 },\n  "perCallLimit": { "usdc": 0.5 }\n}';

const OUTCOME: Readonly<Record<SimulatedOutcome, { text: string; badge: string }>> = {
  pass: { text: "would pass", badge: "badge-confirmed" },
  refuse: { text: "would refuse", badge: "badge-rejected" },
  needs_approval: { text: "would need approval", badge: "badge-warning" },
};

function Count({ entry }: { entry: SimulationCount }): ReactNode {
  return (
    <>
      {entry.count.toLocaleString("en-GB")} (<Amount value={entry.amount} unit />)
    </>
  );
}

function Result({ variables }: { variables: PolicySimulationVariables }): ReactNode {
  const [{ data, error, fetching }, refetch] = useQuery<PolicySimulationData, PolicySimulationVariables>({
    query: SIMULATE_POLICY,
    variables,
    requestPolicy: "network-only",
  });
  const result = data?.simulatePolicy;
  return (
    <TableState what="the backtest" error={error} fetching={fetching} loaded={result !== undefined} refetch={refetch}>
      {result === undefined ? null : (
        <div data-testid="backtest-result">
          <dl className="facts" data-testid="backtest-totals">
            <dt>Payments replayed</dt>
            <dd data-testid="backtest-attempts">
              {result.totals.attempts.toLocaleString("en-GB")} ({result.truncated ? "the oldest 200,000 of the window" : "the whole window"}
              )
            </dd>
            <dt>Would pass</dt>
            <dd>
              <Count entry={result.totals.passed} />
            </dd>
            <dt>Would refuse</dt>
            <dd data-testid="backtest-refused">
              <Count entry={result.totals.refused} />
            </dd>
            <dt>Would need approval</dt>
            <dd>
              <Count entry={result.totals.needsApproval} />
            </dd>
            <dt>Changed</dt>
            <dd>{result.totals.changed.toLocaleString("en-GB")} decided otherwise than they were</dd>
          </dl>
          {result.totals.refusedByRule.length === 0 ? null : (
            <DataTable
              testId="backtest-by-rule"
              caption="Would refuse, by rule"
              columns={[{ head: "Rule" }, { head: "Payments", num: true }]}
              wrap={false}
            >
              {result.totals.refusedByRule.map((entry) => (
                <tr key={entry.rule} data-rule={entry.rule}>
                  <td>{entry.rule}</td>
                  <td className="num">
                    <Count entry={entry} />
                  </td>
                </tr>
              ))}
            </DataTable>
          )}
          {result.totals.refusedByDomain.length === 0 ? null : (
            <DataTable
              testId="backtest-by-domain"
              caption="Would refuse, by domain"
              columns={[{ head: "Domain" }, { head: "Payments", num: true }]}
              wrap={false}
            >
              {result.totals.refusedByDomain.map((entry) => (
                <tr key={entry.domain}>
                  <td>
                    <Truncated text={entry.domain} />
                  </td>
                  <td className="num">
                    <Count entry={entry} />
                  </td>
                </tr>
              ))}
            </DataTable>
          )}
          <DataTable
            testId="backtest-payments"
            caption={`The payments, oldest first (at most ${LISTED})`}
            columns={[
              { head: "Time", width: "w-time" },
              { head: "Amount", num: true },
              { head: "Then", opt: true },
              { head: "Candidate" },
              { head: "Why", width: "" },
              { head: "Endpoint", opt: true },
            ]}
          >
            {result.payments.map((payment) => (
              <tr key={payment.id} data-testid="backtest-row" data-outcome={payment.outcome} data-rule={payment.rule ?? ""}>
                <td>
                  <Time iso={payment.at} />
                </td>
                <td className="num">
                  <Amount value={payment.amount} />
                </td>
                <td className="opt">{OUTCOME[payment.recorded].text.replace("would ", "")}</td>
                <td>
                  <span className={`badge ${OUTCOME[payment.outcome].badge}`}>{OUTCOME[payment.outcome].text}</span>
                </td>
                <td>{payment.reason === null ? <span className="muted">—</span> : <Truncated text={payment.reason} />}</td>
                <td className="opt">
                  <Truncated text={payment.endpoint} className="endpoint" />
                </td>
              </tr>
            ))}
          </DataTable>
        </div>
      )}
    </TableState>
  );
}

export function PolicyBacktest({ agentId }: { agentId: string }): ReactNode {
  const [policy, setPolicy] = useState(EXAMPLE);
  const [span, setSpan] = useState<string>("30d");
  const [problem, setProblem] = useState<string | null>(null);
  const [run, setRun] = useState<PolicySimulationVariables | null>(null);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    try {
      JSON.parse(policy);
    } catch {
      setProblem("The candidate policy is not JSON.");
      return;
    }
    setProblem(null);
    setRun({ agentId, policy, window: span, limit: LISTED });
  };
  return (
    <div className="backtest" data-testid="backtest">
      <form onSubmit={submit} className="filters">
        <label>
          Candidate policy (JSON, as PUT /v1/policies takes it)
          <textarea
            name="policy"
            rows={6}
            cols={48}
            spellCheck={false}
            value={policy}
            onChange={(event) => setPolicy(event.target.value)}
            data-testid="backtest-policy"
          />
        </label>
        <label>
          Window
          <select name="window" value={span} onChange={(event) => setSpan(event.target.value)} data-testid="backtest-window">
            {WINDOWS.map((w) => (
              <option key={w} value={w}>
                last {w}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" data-testid="backtest-run">
          Backtest
        </button>
      </form>
      {problem === null ? null : (
        <p className="error" role="alert">
          {problem}
        </p>
      )}
      {run === null ? null : <Result key={JSON.stringify(run)} variables={run} />}
    </div>
  );
}
