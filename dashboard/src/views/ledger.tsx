/**
 * Ledger (spec 4.9 Ledger tab): every transaction of the account, newest first, filterable as
 * `transactions.list` is (agent, protocol, domain, since, status), paged by cursor through any
 * number of rows. Each row has its explorer link and status: confirmed / finalized on the chain
 * (or rejected by a policy), and verified / unverified for records that name a separate
 * settlement transfer. A payment in a run (it has a parent or children) links to the run.
 */
import { type ReactNode, useEffect, useState } from "react";
import { useQuery } from "urql";
import { Link } from "../components/link";
import { AgentFilter, SelectFilter, TextFilter } from "../components/filters";
import { TableState } from "../components/states";
import { Truncated } from "../components/truncated";
import { AgentLink, Amount, ProtocolBadge, StatusBadge, Time, TxHash } from "../components/values";
import { type Protocol, TRANSACTIONS, type TransactionStatus, type TransactionsData, type TransactionsVariables } from "../graphql/queries";
import { markOnce } from "../perf";
import { href } from "../router";

const PAGE_SIZES = [10, 25, 50, 100, 200] as const;

export function LedgerView({ params }: { params: URLSearchParams }): ReactNode {
  const agentId = params.get("agent");
  const protocol = params.get("protocol") as Protocol | null;
  const domain = params.get("domain");
  const since = params.get("since");
  const status = params.get("status") as TransactionStatus | null;
  const sizeParam = Number(params.get("size") ?? "50");
  const size = (PAGE_SIZES as readonly number[]).includes(sizeParam) ? sizeParam : 50;
  const filterKey = [agentId, protocol, domain, since, status, size].join("|");
  // Cursors of the pages before the current one (the first page has none); new filters start over.
  const [paging, setPaging] = useState<{ key: string; cursors: string[] }>({ key: filterKey, cursors: [] });
  const cursors = paging.key === filterKey ? paging.cursors : [];
  const setCursors = (change: (current: string[]) => string[]): void => setPaging({ key: filterKey, cursors: change(cursors) });
  const after = cursors.at(-1) ?? null;
  const variables: TransactionsVariables = { agentId, protocol, domain, since, status, limit: size, after };
  const [{ data, fetching, error }, refetch] = useQuery<TransactionsData, TransactionsVariables>({ query: TRANSACTIONS, variables });
  const nodes = data?.transactions.nodes ?? [];
  const page = data?.transactions.pageInfo;
  const first = cursors.length * size + 1;
  useEffect(() => {
    if (nodes.length > 0) markOnce("apg:ledger-rows");
  }, [nodes.length]);

  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">Ledger</h1>
      <div className="filters">
        <AgentFilter value={agentId} />
        <SelectFilter
          label="Protocol"
          name="protocol"
          value={protocol}
          options={[
            ["", "Any"],
            ["x402", "x402"],
            ["mpp", "MPP"],
          ]}
        />
        <SelectFilter
          label="Status"
          name="status"
          value={status}
          options={[
            ["", "Any"],
            ["confirmed", "confirmed"],
            ["finalized", "finalized"],
            ["rejected", "rejected"],
          ]}
        />
        <TextFilter label="Domain" name="domain" value={domain} placeholder="api.example.com" />
        <TextFilter label="Since" name="since" value={since} placeholder="24h, 7d, 30m" />
        <SelectFilter
          label="Rows per page"
          name="size"
          value={String(size)}
          options={PAGE_SIZES.map((n) => [String(n), String(n)] as [string, string])}
        />
      </div>
      <TableState
        what="transactions"
        error={error}
        fetching={fetching}
        loaded={data != null}
        empty={nodes.length === 0}
        emptyText={cursors.length === 0 ? "No transactions match these filters." : "No more transactions."}
        retry={() => refetch({ requestPolicy: "network-only" })}
      >
        <div className="table-wrap">
          <table className="data" data-testid="ledger-table">
            <colgroup>
              <col className="w-time" />
              <col className="w-agent" />
              <col className="w-protocol opt" />
              <col className="w-amount" />
              <col />
              <col className="w-status opt" />
              <col className="w-hash opt" />
              <col className="w-run opt" />
            </colgroup>
            <caption className="visually-hidden">Transactions, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Agent</th>
                <th scope="col" className="opt">
                  Protocol
                </th>
                <th scope="col" className="num">
                  Amount (USDC)
                </th>
                <th scope="col">Endpoint</th>
                <th scope="col" className="opt">
                  Status
                </th>
                <th scope="col" className="opt">
                  Transaction
                </th>
                <th scope="col" className="opt">
                  Run
                </th>
              </tr>
            </thead>
            <tbody>
              {nodes.map((tx) => (
                <tr key={tx.id} data-testid="ledger-row" data-tx-hash={tx.txHash ?? ""} data-status={tx.status}>
                  <td>
                    <Time iso={tx.timestamp} />
                  </td>
                  <td>
                    <AgentLink agentId={tx.agentId} />
                  </td>
                  <td className="opt">
                    <ProtocolBadge protocol={tx.protocol} />
                  </td>
                  <td className="num">
                    <Amount value={tx.amountPaid} />
                  </td>
                  <td>
                    <Truncated text={tx.endpoint} className="endpoint" />
                  </td>
                  <td className="opt">
                    <StatusBadge status={tx.status} settlement={tx.settlementStatus} />
                    {tx.rejectionCode !== null ? <span className="muted"> {tx.rejectionCode}</span> : null}
                  </td>
                  <td className="opt">
                    <TxHash hash={tx.txHash} explorer={tx.solanaExplorer} />
                  </td>
                  <td className="opt">
                    {tx.txHash !== null && (tx.parentTxHash !== null || tx.childCount > 0) ? (
                      <Link to={href(`runs/${tx.txHash}`)}>
                        {tx.childCount > 0 ? `run (${tx.childCount} under it)` : `run (depth ${tx.depth})`}
                      </Link>
                    ) : (
                      <span className="muted">—</span>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </TableState>
      <nav className="pager" aria-label="Ledger pages">
        <button type="button" disabled={cursors.length === 0} onClick={() => setCursors((current) => current.slice(0, -1))}>
          ← Newer
        </button>
        <span data-testid="ledger-range" aria-live="polite">
          {nodes.length === 0 ? "" : `Rows ${first}–${first + nodes.length - 1}`}
        </span>
        <button
          type="button"
          disabled={page?.hasNextPage !== true || page.endCursor === null}
          onClick={() => page?.endCursor && setCursors((current) => [...current, page.endCursor!])}
        >
          Older →
        </button>
      </nav>
    </section>
  );
}
