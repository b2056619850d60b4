/**
 * Live feed (spec 4.9): each payment the account's agents make, as the ledger records it, without
 * a reload. The subscription `transactionRecorded` streams new payments over SSE; each time the
 * stream (re)connects, the newest payments are re-read (`transactions`), so a dropped connection
 * loses no row; rows are merged in order without duplicates (feed-state.ts).
 */
import type { Client } from "@urql/core";
import { type ReactNode, useEffect, useReducer, useState } from "react";
import { useClient } from "urql";
import { AgentFilter } from "../components/filters";
import { TableState } from "../components/states";
import { type Column, DataTable } from "../components/table";
import { RunCell, TRANSACTION_COLUMNS, TransactionCells } from "../components/transaction-cells";
import { TxHash } from "../components/values";
import { EMPTY_FEED, FEED_MAX, type FeedRow, type FeedState, mergeFeed } from "../feed-state";
import { failedStatus, queryOnce, subscribeLive } from "../graphql/client";
import {
  TRANSACTION_RECORDED,
  TRANSACTIONS,
  type TransactionRow,
  type TransactionsData,
  type TransactionsVariables,
} from "../graphql/queries";
import { markOnce } from "../perf";
import { reportUnauthenticated } from "../session";

type Connection = "connecting" | "live" | "reconnecting";

type Action = { kind: "add"; rows: readonly TransactionRow[]; reread: boolean } | { kind: "reset" };

function reduce(state: FeedState, action: Action): FeedState {
  return action.kind === "reset" ? EMPTY_FEED : mergeFeed(state, action.rows, { reread: action.reread });
}

const REOPEN_MAX_MS = 5_000;

/** The newest chain payments (both chain statuses: a rejection is not a feed row). */
async function newest(client: Client, agentId: string | null): Promise<TransactionRow[]> {
  const read = (status: "confirmed" | "finalized") =>
    queryOnce<TransactionsData, TransactionsVariables>(client, TRANSACTIONS, { agentId, status, limit: FEED_MAX }).then(
      (d) => d.transactions.nodes,
    );
  const [confirmed, finalized] = await Promise.all([read("confirmed"), read("finalized")]);
  return [...confirmed, ...finalized].sort((a, b) => Date.parse(b.timestamp) - Date.parse(a.timestamp));
}

function useLiveFeed(agentId: string | null): { state: FeedState; connection: Connection; error: unknown } {
  const client = useClient();
  const [state, dispatch] = useReducer(reduce, EMPTY_FEED);
  const [connection, setConnection] = useState<Connection>("connecting");
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    dispatch({ kind: "reset" });
    let stopped = false;
    let dispose: (() => void) | null = null;
    let failures = 0;
    let timer: number | undefined;
    // Events of a stream that was replaced (or disposed) are ignored.
    let current = 0;

    const reopen = (): void => {
      current += 1;
      dispose?.();
      dispose = null;
      if (stopped) return;
      setConnection("reconnecting");
      const delay = Math.min(REOPEN_MAX_MS, 250 * 2 ** failures);
      failures += 1;
      timer = window.setTimeout(open, delay);
    };

    const catchUp = (): void => {
      newest(client, agentId).then(
        (rows) => {
          if (stopped) return;
          setError(null);
          dispatch({ kind: "add", rows, reread: true });
        },
        (reason: unknown) => {
          if (!stopped) setError(reason);
        },
      );
    };

    function open(): void {
      if (stopped) return;
      current += 1;
      const mine = current;
      const live = (): boolean => !stopped && mine === current;
      dispose = subscribeLive<{ transactionRecorded: TransactionRow }>(
        { query: TRANSACTION_RECORDED, variables: { agentId } },
        {
          connecting: (again) => {
            if (live()) setConnection(again ? "reconnecting" : "connecting");
          },
          connected: () => {
            if (!live()) return;
            failures = 0;
            setConnection("live");
            catchUp();
          },
          next: (result) => {
            if (!live()) return;
            if (result.errors !== undefined && result.errors.length > 0) {
              if (result.errors.some((e) => (e.extensions as { code?: string } | undefined)?.code === "AUTHENTICATION_ERROR")) {
                reportUnauthenticated();
              }
              return;
            }
            const tx = result.data?.transactionRecorded;
            if (tx !== undefined) dispatch({ kind: "add", rows: [tx], reread: false });
          },
          error: (reason) => {
            if (!live()) return;
            if (failedStatus(reason) === 401) {
              reportUnauthenticated();
              return;
            }
            setError(reason);
            reopen();
          },
          // The server ended the stream (it restarted, or the subscription ended): open it again.
          complete: () => {
            if (live()) reopen();
          },
        },
      );
    }

    open();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
      dispose?.();
    };
  }, [agentId, client]);

  return { state, connection, error };
}

function FeedRowView({ row }: { row: FeedRow }): ReactNode {
  const { tx } = row;
  useEffect(() => {
    if (row.live && tx.txHash !== null) markOnce(`apg:feed-row:${tx.txHash}`);
  }, [row.live, tx.txHash]);
  return (
    <tr data-testid="feed-row" data-tx-hash={tx.txHash ?? ""}>
      <TransactionCells tx={tx} />
      <td className="opt">
        <TxHash hash={tx.txHash} explorer={tx.solanaExplorer} />
      </td>
      <RunCell tx={tx}>run</RunCell>
    </tr>
  );
}

const COLUMNS: readonly Column[] = [
  ...TRANSACTION_COLUMNS,
  { head: "Transaction", width: "w-hash", opt: true },
  { head: "Run", width: "w-run", opt: true },
];

const CONNECTION_TEXT: Record<Connection, string> = {
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting… (missed payments are re-read on reconnect)",
};

export function LiveFeedView({ params }: { params: URLSearchParams }): ReactNode {
  const agentId = params.get("agent");
  const { state, connection, error } = useLiveFeed(agentId);
  useEffect(() => {
    if (connection === "live") markOnce("apg:feed-live");
    if (state.rows.length > 0) markOnce("apg:feed-rows");
  }, [connection, state.rows.length]);
  return (
    <section aria-labelledby="view-title">
      <div className="view-head">
        <h1 id="view-title">Live feed</h1>
        <p className={`connection connection-${connection}`} role="status" aria-live="polite" data-testid="feed-connection">
          <span aria-hidden="true">●</span> {CONNECTION_TEXT[connection]}
        </p>
      </div>
      <p className="lede">Payments as the ledger records them, newest first (the latest {FEED_MAX}).</p>
      <div className="filters">
        <AgentFilter value={agentId} />
      </div>
      {/* A stream, not a read: never "loading"; before it is live the empty text says it is waiting. */}
      <TableState
        what="the live feed"
        error={connection === "live" ? null : error}
        fetching={false}
        loaded
        empty={state.rows.length === 0}
        emptyText={connection === "live" ? "No payments yet. New ones appear here as they are recorded." : "Waiting for the feed…"}
      >
        <DataTable testId="feed-table" caption="Live feed of payments" captionHidden columns={COLUMNS}>
          {state.rows.map((row) => (
            <FeedRowView key={row.tx.txHash ?? row.tx.id} row={row} />
          ))}
        </DataTable>
      </TableState>
    </section>
  );
}
