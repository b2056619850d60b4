/**
 * The columns a payment row starts with in every payments list (time, agent, protocol, amount,
 * endpoint), and the cell linking a payment to its run.
 */
import type { ReactNode } from "react";
import type { TransactionRow } from "../graphql/queries";
import { href } from "../router";
import { Link } from "./link";
import type { Column } from "./table";
import { Truncated } from "./truncated";
import { AgentLink, Amount, ProtocolBadge, Time } from "./values";

export const TRANSACTION_COLUMNS: readonly Column[] = [
  { head: "Time", width: "w-time" },
  { head: "Agent", width: "w-agent" },
  { head: "Protocol", width: "w-protocol", opt: true },
  { head: "Amount (USDC)", width: "w-amount", num: true },
  { head: "Endpoint", width: "" },
];

export function TransactionCells({ tx }: { tx: TransactionRow }): ReactNode {
  return (
    <>
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
    </>
  );
}

/** A link to the payment's run when it is in one (it has a parent or children), else a dash. */
export function RunCell({ tx, children }: { tx: TransactionRow; children: ReactNode }): ReactNode {
  return (
    <td className="opt">
      {tx.txHash !== null && (tx.parentTxHash !== null || tx.childCount > 0) ? (
        <Link to={href(`runs/${tx.txHash}`)}>{children}</Link>
      ) : (
        <span className="muted">—</span>
      )}
    </td>
  );
}
