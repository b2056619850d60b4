/** Small renderers every view uses: amounts, times, hashes and explorer links, protocols, statuses. */
import type { ReactNode } from "react";
import { formatAmount } from "../money";
import { href } from "../router";
import { localTime, utcTime } from "../time";
import { Link } from "./link";

/** An exact amount (the API's decimal string), grouped and trimmed to cents where exact. */
export function Amount({ value, unit }: { value: string; unit?: boolean }): ReactNode {
  return (
    <span className="num" data-amount={value}>
      {formatAmount(value)}
      {unit === true ? " USDC" : null}
    </span>
  );
}

/** A time in the viewer's zone; hovering shows it in UTC. */
export function Time({ iso }: { iso: string }): ReactNode {
  return (
    <time dateTime={iso} title={utcTime(iso)}>
      {localTime(iso)}
    </time>
  );
}

export function shortHash(hash: string): string {
  return hash.length <= 16 ? hash : `${hash.slice(0, 8)}…${hash.slice(-6)}`;
}

/** A transaction hash, shortened (full on hover), with its explorer link when it has one. */
export function TxHash({ hash, explorer }: { hash: string | null; explorer?: string | null }): ReactNode {
  if (hash === null) return <span className="muted">not on chain</span>;
  return (
    <span className="hash">
      <code title={hash} data-tx-hash={hash}>
        {shortHash(hash)}
      </code>
      {explorer ? (
        <>
          {" "}
          <a href={explorer} target="_blank" rel="noopener noreferrer" aria-label={`Open ${shortHash(hash)} in the explorer`}>
            explorer ↗
          </a>
        </>
      ) : null}
    </span>
  );
}

export function ProtocolBadge({ protocol }: { protocol: string | null }): ReactNode {
  if (protocol === null) return <span className="muted">—</span>;
  return <span className={`badge badge-${protocol}`}>{protocol === "mpp" ? "MPP" : "x402"}</span>;
}

export function StatusBadge({ status, settlement }: { status: string; settlement?: string | null }): ReactNode {
  return (
    <span className="status">
      <span className={`badge badge-${status}`}>{status}</span>
      {settlement ? <span className={`badge badge-${settlement}`}>{settlement}</span> : null}
    </span>
  );
}

/** An agent's id linking to its page; cut with an ellipsis in a narrow cell, whole on hover. */
export function AgentLink({ agentId }: { agentId: string }): ReactNode {
  return (
    <Link to={href(`agents/${encodeURIComponent(agentId)}`)} className="trunc" title={agentId}>
      {agentId}
    </Link>
  );
}
