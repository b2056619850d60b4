/**
 * Ledger (spec 4.9 Ledger tab): every transaction of the account, newest first, filterable as
 * `transactions.list` is (agent, protocol, domain, since, status), paged by cursor through any
 * number of rows. Each row has its explorer link and status: confirmed / finalized on the chain
 * (or rejected by a policy), and verified / unverified for records that name a separate
 * settlement transfer. A payment in a run (it has a parent or children) links to the run.
 */
import { type ReactNode, useEffect } from "react";
import { useQuery } from "urql";
import { CursorPager, useCursorPages } from "../components/cursor-pager";
import { AgentFilter, SelectFilter, TextFilter } from "../components/filters";
import { TableState } from "../components/states";
import { type Column, DataTable } from "../components/table";
import { RunCell, TRANSACTION_COLUMNS, TransactionCells } from "../components/transaction-cells";
import { StatusBadge, TxHash } from "../components/values";
import { type Protocol, TRANSACTIONS, type TransactionStatus, type TransactionsData, type TransactionsVariables } from "../graphql/queries";
import { markOnce } from "../perf";

const PAGE_SIZES = [10, 25, 50, 100, 200] as const;

const COLUMNS: readonly Column[] = [
  ...TRANSACTION_COLUMNS,
  { head: "Status", width: "w-status", opt: true },
  { head: "Transaction", width: "w-hash", opt: true },
  { head: "Run", width: "w-run", opt: true },
];

export function LedgerView({ params }: { params: URLSearchParams }): ReactNode {
  const agentId = params.get("agent");
  const protocol = params.get("protocol") as Protocol | null;
  const domain = params.get("domain");
  const since = params.get("since");
  const status = params.get("status") as TransactionStatus | null;
  const sizeParam = Number(params.get("size") ?? "50");
  const size = (PAGE_SIZES as readonly number[]).includes(sizeParam) ? sizeParam : 50;
  const pages = useCursorPages([agentId, protocol, domain, since, status, size].join("|"));
  const variables: TransactionsVariables = { agentId, protocol, domain, since, status, limit: size, after: pages.after };
  const [{ data, fetching, error }, refetch] = useQuery<TransactionsData, TransactionsVariables>({ query: TRANSACTIONS, variables });
  const nodes = data?.transactions.nodes ?? [];
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
        emptyText={pages.cursors.length === 0 ? "No transactions match these filters." : "No more transactions."}
        refetch={refetch}
      >
        <DataTable testId="ledger-table" caption="Transactions, newest first" captionHidden columns={COLUMNS}>
          {nodes.map((tx) => (
            <tr
              key={tx.id}
              data-testid="ledger-row"
              data-tx-hash={tx.txHash ?? ""}
              data-status={tx.status}
              data-policy-version={tx.policyVersion ?? ""}
            >
              <TransactionCells tx={tx} />
              <td className="opt">
                <StatusBadge status={tx.status} settlement={tx.settlementStatus} />
                {tx.rejectionCode !== null ? <span className="muted"> {tx.rejectionCode}</span> : null}
                {tx.policyVersion !== null ? (
                  <span className="muted" title={`decided under version ${tx.policyVersion} of the agent's policy`}>
                    {" "}
                    policy v{tx.policyVersion}
                  </span>
                ) : null}
              </td>
              <td className="opt">
                <TxHash hash={tx.txHash} explorer={tx.solanaExplorer} />
              </td>
              <RunCell tx={tx}>{tx.childCount > 0 ? `run (${tx.childCount} under it)` : `run (depth ${tx.depth})`}</RunCell>
            </tr>
          ))}
        </DataTable>
      </TableState>
      <CursorPager
        label="Ledger pages"
        testId="ledger-range"
        pages={pages}
        size={size}
        shown={nodes.length}
        pageInfo={data?.transactions.pageInfo}
      />
    </section>
  );
}
