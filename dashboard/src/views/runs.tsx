/**
 * Runs (spec 4.7: "Costs are aggregated in the dashboard under the orchestrator's run ID"): a run
 * is a root payment and everything invoked under it. Reached from any payment with a parent or
 * children (its run is found by walking up, `runRootTxHash`); shows the payment tree drawn as a
 * tree, each agent's cost and the total, and each `agents.invoke` budget against what was spent.
 * Sums are bigint base units; the total is the API's own (`paymentTree.totals`).
 */
import { type ReactNode, useId, useMemo, useState } from "react";
import { useQuery } from "urql";
import { AgentFilter } from "../components/filters";
import { Link } from "../components/link";
import { Truncated } from "../components/truncated";
import { offsetParam, Pager, plural } from "../components/pager";
import { TableState } from "../components/states";
import { DataTable } from "../components/table";
import { AgentLink, Amount, ProtocolBadge, shortHash, Time, TxHash } from "../components/values";
import {
  INVOCATIONS,
  type InvocationsData,
  RUN,
  RUN_ROOT,
  type RunData,
  type RunRootData,
  RUNS,
  type RunsData,
  type RunsVariables,
  type TreeNode,
} from "../graphql/queries";
import { percentOf, sumUnits, unitsToDecimal } from "../money";
import { href, navigate, setParams } from "../router";

interface Branch {
  readonly node: TreeNode;
  readonly children: Branch[];
  readonly subtreeUnits: bigint;
}

/** The flat, depth-ordered nodes as a tree (the API answers flat: GraphQL has no recursion). */
export function buildTree(nodes: readonly TreeNode[]): Branch | null {
  const children = new Map<string, TreeNode[]>();
  for (const node of nodes) {
    if (node.parentTxHash === null) continue;
    children.set(node.parentTxHash, [...(children.get(node.parentTxHash) ?? []), node]);
  }
  const build = (node: TreeNode): Branch => {
    const kids = (children.get(node.txHash) ?? []).map(build);
    return { node, children: kids, subtreeUnits: BigInt(node.amountUnits) + sumUnits(kids.map((k) => k.subtreeUnits)) };
  };
  const root = nodes.find((node) => node.depth === 0);
  return root === undefined ? null : build(root);
}

function BranchView({ branch, current }: { branch: Branch; current: string | null }): ReactNode {
  const { node } = branch;
  return (
    <li>
      <div
        className={`tree-node${node.txHash === current ? " current" : ""}`}
        aria-current={node.txHash === current ? "true" : undefined}
        data-testid="tree-node"
        data-tx-hash={node.txHash}
        data-depth={node.depth}
      >
        <span className="depth">depth {node.depth}</span> <AgentLink agentId={node.agentId} /> paid <Amount value={node.amount} unit />{" "}
        <ProtocolBadge protocol={node.protocol} /> <Truncated text={node.endpoint} className="endpoint" /> <Time iso={node.timestamp} />{" "}
        <TxHash hash={node.txHash} explorer={node.solanaExplorer} />
        {branch.children.length > 0 ? (
          <span className="muted">
            {" "}
            · with what it invoked: <Amount value={unitsToDecimal(branch.subtreeUnits)} unit />
          </span>
        ) : null}
      </div>
      {branch.children.length > 0 ? (
        <ul>
          {branch.children.map((child) => (
            <BranchView key={child.node.txHash} branch={child} current={current} />
          ))}
        </ul>
      ) : null}
    </li>
  );
}

function Run({ rootTxHash, current }: { rootTxHash: string; current: string | null }): ReactNode {
  const [{ data, fetching, error }] = useQuery<RunData>({ query: RUN, variables: { rootTxHash } });
  const tree = data?.paymentTree ?? null;
  const parents = useMemo(() => {
    if (tree === null) return [];
    const withChildren = new Set(tree.nodes.map((n) => n.parentTxHash).filter((h): h is string => h !== null));
    return [...withChildren].slice(0, 100);
  }, [tree]);
  const [invocations] = useQuery<InvocationsData>({ query: INVOCATIONS, variables: { txHashes: parents }, pause: parents.length === 0 });
  const root = useMemo(() => (tree === null ? null : buildTree(tree.nodes)), [tree]);
  const perAgent = useMemo(() => {
    const byAgent = new Map<string, { units: bigint; count: number }>();
    for (const node of tree?.nodes ?? []) {
      const entry = byAgent.get(node.agentId) ?? { units: 0n, count: 0 };
      byAgent.set(node.agentId, { units: entry.units + BigInt(node.amountUnits), count: entry.count + 1 });
    }
    return [...byAgent.entries()].sort((a, b) => (a[1].units === b[1].units ? a[0].localeCompare(b[0]) : a[1].units > b[1].units ? -1 : 1));
  }, [tree]);

  if (error !== undefined || data == null || tree === null || root === null) {
    return (
      <TableState
        what="the run"
        error={error}
        fetching={fetching}
        loaded={data != null}
        empty
        emptyText={`No run of this account starts at ${shortHash(rootTxHash)}.`}
      />
    );
  }
  const budgets = invocations.data?.invocations ?? [];
  return (
    <>
      <div className="totals" data-testid="run-totals">
        <div className="total">
          <span className="label">Run</span>
          <span className="value small">
            <code title={tree.rootTxHash}>{shortHash(tree.rootTxHash)}</code>
          </span>
        </div>
        <div className="total">
          <span className="label">Total cost</span>
          <span className="value" data-testid="run-total">
            <Amount value={tree.totals.amount} unit />
          </span>
        </div>
        <div className="total">
          <span className="label">Payments</span>
          <span className="value" data-testid="run-count">
            {tree.totals.transactionCount}
          </span>
        </div>
        <div className="total">
          <span className="label">Agents</span>
          <span className="value" data-testid="run-agents">
            {tree.totals.agentCount}
          </span>
        </div>
      </div>
      {tree.truncated ? <p className="warning">This run is larger than shown (500 payments, 16 levels).</p> : null}
      <h2>Payment tree</h2>
      <ul className="tree" aria-label="Payment tree of the run" data-testid="run-tree">
        <BranchView branch={root} current={current} />
      </ul>
      <div className="grid-2">
        <DataTable
          testId="run-by-agent"
          className="data compact"
          wrap={false}
          caption="Cost per agent"
          columns={[{ head: "Agent" }, { head: "Spent (USDC)", num: true }, { head: "Payments", num: true }]}
          foot={
            <tr>
              <th scope="row">Total</th>
              <td className="num">
                <Amount value={tree.totals.amount} />
              </td>
              <td className="num">{tree.totals.transactionCount}</td>
            </tr>
          }
        >
          {perAgent.map(([agentId, entry]) => (
            <tr key={agentId} data-agent={agentId}>
              <th scope="row">
                <AgentLink agentId={agentId} />
              </th>
              <td className="num">
                <Amount value={unitsToDecimal(entry.units)} />
              </td>
              <td className="num">{entry.count}</td>
            </tr>
          ))}
        </DataTable>
        <DataTable
          testId="run-budgets"
          className="data compact"
          wrap={false}
          caption="Invocation budgets (agents.invoke) against spent"
          columns={[
            { head: "Invoked by" },
            { head: "Sub-agent" },
            { head: "Budget", num: true },
            { head: "Spent", num: true },
            { head: "Left", num: true },
          ]}
        >
          {budgets.length === 0 ? (
            <tr>
              <td colSpan={5} className="muted">
                {invocations.fetching ? "Loading…" : "No invocation budget in this run."}
              </td>
            </tr>
          ) : (
            budgets.flatMap((invocation) =>
              invocation.subAgents.map((sub) => (
                <tr key={sub.invocation} data-sub-agent={sub.subAgentId ?? sub.subAgentAddress}>
                  <td>
                    {sub.invokerAgentId === null ? (
                      <span className="muted">another account</span>
                    ) : (
                      <AgentLink agentId={sub.invokerAgentId} />
                    )}
                  </td>
                  <td>
                    {sub.subAgentId === null ? (
                      <code title={sub.subAgentAddress}>{shortHash(sub.subAgentAddress)}</code>
                    ) : (
                      <AgentLink agentId={sub.subAgentId} />
                    )}
                  </td>
                  <td className="num">
                    <Amount value={sub.budget} />
                  </td>
                  <td className="num">
                    <Amount value={sub.spent} />
                  </td>
                  <td className="num">
                    <Amount value={sub.remaining} />
                  </td>
                </tr>
              )),
            )
          )}
        </DataTable>
      </div>
    </>
  );
}

function RunOf({ txHash }: { txHash: string }): ReactNode {
  const [{ data, fetching, error }] = useQuery<RunRootData>({ query: RUN_ROOT, variables: { txHash } });
  const root = data?.transaction?.runRootTxHash ?? null;
  if (error === undefined && root !== null) return <Run rootTxHash={root} current={txHash} />;
  return (
    <TableState
      what="the run"
      error={error}
      fetching={fetching}
      loaded={data != null}
      empty={error === undefined}
      emptyText={`No payment of this account has the hash ${shortHash(txHash)}.`}
    />
  );
}

function OpenRun(): ReactNode {
  const id = useId();
  const [hash, setHash] = useState("");
  return (
    <form
      className="filters"
      onSubmit={(event) => {
        event.preventDefault();
        if (hash.trim() !== "") navigate(href(`runs/${hash.trim()}`));
      }}
    >
      <div className="field">
        <label htmlFor={id}>Transaction hash</label>
        <input id={id} type="text" className="hash-input" value={hash} onChange={(event) => setHash(event.target.value)} />
      </div>
      <button type="submit">Open its run</button>
    </form>
  );
}

const RUN_PAGE = 25;

/** Runs of the account (or started by one agent), newest or costliest first, with their totals. */
function RunList({ agentId, order, offset }: { agentId: string | null; order: "recent" | "cost"; offset: number }): ReactNode {
  const variables: RunsVariables = { agentId, order, first: RUN_PAGE, offset };
  const [{ data, fetching, error }, refetch] = useQuery<RunsData, RunsVariables>({ query: RUNS, variables });
  const runs = data?.runs;
  const rows = runs?.nodes ?? [];
  return (
    <>
      <TableState
        what="runs"
        error={error}
        fetching={fetching}
        loaded={runs !== undefined}
        empty={rows.length === 0}
        emptyText={`No run${agentId === null ? "" : ` started by ${agentId}`} yet (a run is a payment that invoked other agents).`}
        refetch={refetch}
      >
        <DataTable
          testId="runs-table"
          caption={`Runs, ${order === "cost" ? "costliest" : "newest"} first`}
          captionHidden
          columns={[
            { head: "Run", width: "w-runhash" },
            { head: "Started by", width: "w-agent" },
            {
              head: (
                <button type="button" className="sort" onClick={() => setParams({ sort: null, offset: null })}>
                  Time{order === "recent" ? " ▼" : ""}
                </button>
              ),
              width: "w-time",
              opt: true,
              sort: order === "recent" ? "descending" : "none",
            },
            {
              head: (
                <button type="button" className="sort" data-testid="sort-by-cost" onClick={() => setParams({ sort: "cost", offset: null })}>
                  Total cost{order === "cost" ? " ▼" : ""}
                </button>
              ),
              width: "w-amount",
              num: true,
              sort: order === "cost" ? "descending" : "none",
            },
            { head: "Payments", width: "w-count", num: true },
            { head: "Agents", width: "w-count", num: true, opt: true },
            { head: "Budget used", width: "w-budget", num: true, opt: true },
          ]}
        >
          {rows.map((run) => (
            <tr key={run.rootTxHash} data-testid="run-row" data-root={run.rootTxHash} data-total={run.total}>
              <td>
                <Link to={href(`runs/${run.rootTxHash}`)} title={run.rootTxHash}>
                  <code>{shortHash(run.rootTxHash)}</code>
                </Link>
              </td>
              <td>
                <AgentLink agentId={run.agentId} />
              </td>
              <td className="opt">
                <Time iso={run.timestamp} />
              </td>
              <td className="num" data-testid="run-cost">
                <Amount value={run.total} />
              </td>
              <td className="num" title={plural(run.paymentCount, "payment")}>
                {run.paymentCount}
              </td>
              <td className="num opt" title={plural(run.agentCount, "agent")}>
                {run.agentCount}
              </td>
              <td className="num opt">
                {run.budget === null || run.budgetSpent === null || run.budgetUnits === null || run.budgetSpentUnits === null ? (
                  <span className="muted">no budget</span>
                ) : (
                  <span title={`${run.budgetSpent} of ${run.budget} USDC`}>
                    {percentOf(BigInt(run.budgetSpentUnits), BigInt(run.budgetUnits))} % of <Amount value={run.budget} />
                  </span>
                )}
              </td>
            </tr>
          ))}
        </DataTable>
      </TableState>
      <Pager label="Runs: pages" offset={offset} size={RUN_PAGE} shown={rows.length} total={runs?.totalCount} />
    </>
  );
}

export function RunsView({ txHash, params }: { txHash: string | null; params: URLSearchParams }): ReactNode {
  const agentId = params.get("agent");
  const order = params.get("sort") === "cost" ? "cost" : "recent";
  const offset = offsetParam(params);
  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Runs</h1>
      {txHash === null ? (
        <>
          <p className="lede">A run is an orchestrator's root payment and every payment invoked under it (agents.invoke).</p>
          <OpenRun />
          <div className="filters">
            <AgentFilter value={agentId} />
          </div>
          <h2>{agentId === null ? "Runs" : "Runs started by this agent"}</h2>
          <RunList agentId={agentId} order={order} offset={offset} />
        </>
      ) : (
        <RunOf txHash={txHash} />
      )}
    </section>
  );
}
