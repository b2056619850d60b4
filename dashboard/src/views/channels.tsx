/**
 * Channels: the account's payment channels (sessions) per agent, and one channel with
 * its deposit, what the payee accepted, what the chain settled, what was refunded, its charges and
 * its settlements. A charge the payee accepted is shown as "accepted, not on chain", never as
 * confirmed: only a settlement puts it on the ledger. The list refreshes on each channel event of
 * the live feed (`channelUpdated`).
 */
import { type ReactNode, useEffect, useState } from "react";
import { useQuery } from "urql";
import { AgentFilter } from "../components/filters";
import { Link } from "../components/link";
import { Empty, TableState } from "../components/states";
import { DataTable } from "../components/table";
import { Truncated } from "../components/truncated";
import { AgentLink, Amount, ProtocolBadge, Time, TxHash } from "../components/values";
import { subscribeLive } from "../graphql/client";
import {
  CHANNEL,
  CHANNEL_UPDATED,
  type ChannelChargeRow,
  type ChannelChargeStatus,
  type ChannelData,
  type ChannelRow,
  CHANNELS,
  type ChannelsData,
  type ChannelsVariables,
} from "../graphql/queries";
import { href } from "../router";

const PAGE = 50;

/** What each charge status means, in words (the badge's title). */
const CHARGE_STATUS: Record<ChannelChargeStatus, { label: string; title: string }> = {
  signed: { label: "signed", title: "Voucher signed for the payer's client; the payee has not accepted it" },
  accepted: { label: "accepted, not on chain", title: "The payee accepted the voucher; no settlement has put it on the ledger yet" },
  settled: { label: "settled", title: "Paid to the payee by a settlement transaction on the ledger" },
  void: { label: "void", title: "Never accepted; not paid" },
};

export function ChannelStatusBadge({ channel }: { channel: Pick<ChannelRow, "status" | "expired"> }): ReactNode {
  return (
    <span className="status">
      <span className={`badge badge-channel-${channel.status}`}>{channel.status}</span>
      {channel.expired ? <span className="badge badge-warning">expired</span> : null}
    </span>
  );
}

function ChargeBadge({ charge }: { charge: ChannelChargeRow }): ReactNode {
  const meaning = CHARGE_STATUS[charge.status];
  return (
    <span className="status" data-testid="charge-status" data-status={charge.status}>
      <span className={`badge badge-charge-${charge.status}`} title={meaning.title}>
        {meaning.label}
      </span>
      {charge.chainStatus !== null ? <span className={`badge badge-${charge.chainStatus}`}>{charge.chainStatus}</span> : null}
    </span>
  );
}

/**
 * Re-reads (`refetch`) on each channel event the account's live feed carries, and once connected
 * (what changed while connecting). Returns whether the stream is connected.
 */
function useChannelEvents(refetch: () => void): boolean {
  const [connected, setConnected] = useState(false);
  useEffect(() => {
    let stopped = false;
    const dispose = subscribeLive<{ channelUpdated: { channel: { address: string } } }>(
      { query: CHANNEL_UPDATED },
      {
        connecting: () => {
          if (!stopped) setConnected(false);
        },
        connected: () => {
          if (stopped) return;
          setConnected(true);
          refetch();
        },
        next: () => {
          if (!stopped) refetch();
        },
        // The view stays as it is; the next visit reads it again.
        error: () => {
          if (!stopped) setConnected(false);
        },
        complete: () => {
          if (!stopped) setConnected(false);
        },
      },
    );
    return () => {
      stopped = true;
      dispose();
    };
  }, [refetch]);
  return connected;
}

export function ChannelsView({ params }: { params: URLSearchParams }): ReactNode {
  const agentId = params.get("agent");
  const [pages, setPages] = useState<(string | null)[]>([null]);
  const [generation, setGeneration] = useState(0);
  const [refetch] = useState(() => () => setGeneration((n) => n + 1));
  const live = useChannelEvents(refetch);
  return (
    <section aria-labelledby="view-title" data-live={live ? "on" : "off"}>
      <h1 id="view-title">Channels</h1>
      <p className="muted">
        Payment sessions: a deposit escrowed on the ledger, one signed voucher per paid request, settlements that pay the payee. Accepted is
        what payees took; only settled is on the ledger.
      </p>
      <div className="filters">
        <AgentFilter value={agentId} />
      </div>
      <table className="data" data-testid="channels-table">
        <caption className="visually-hidden">Payment channels, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Opened</th>
            <th scope="col">Agent</th>
            <th scope="col">Service</th>
            <th scope="col">Protocol</th>
            <th scope="col">Status</th>
            <th scope="col" className="num">
              Deposit (USDC)
            </th>
            <th scope="col" className="num">
              Accepted
            </th>
            <th scope="col" className="num">
              Settled
            </th>
            <th scope="col" className="num">
              Refunded
            </th>
          </tr>
        </thead>
        {pages.map((after, index) => (
          <ChannelPage
            key={`${agentId ?? ""}:${after ?? "first"}:${generation}`}
            agentId={agentId}
            after={after}
            last={index === pages.length - 1}
            more={(cursor) => setPages((current) => [...current, cursor])}
          />
        ))}
      </table>
    </section>
  );
}

function ChannelPage(props: { agentId: string | null; after: string | null; last: boolean; more: (cursor: string) => void }): ReactNode {
  const variables: ChannelsVariables = { agentId: props.agentId, first: PAGE, after: props.after };
  const [{ data, error, fetching }] = useQuery<ChannelsData, ChannelsVariables>({ query: CHANNELS, variables });
  const nodes = data?.channels.nodes ?? [];
  const page = data?.channels.pageInfo;
  return (
    <tbody>
      <TableState
        what="channels"
        colSpan={9}
        error={error}
        fetching={fetching}
        loaded={data != null}
        empty={nodes.length === 0 && props.after === null}
        emptyText="No payment channel yet."
      >
        {nodes.map((channel) => (
          <tr key={channel.address} data-testid="channel-row" data-channel={channel.address} data-status={channel.status}>
            <td>
              <Link to={href(`channels/${encodeURIComponent(channel.address)}`)}>
                <Time iso={channel.openedAt} />
              </Link>
            </td>
            <td>
              <AgentLink agentId={channel.agentId} />
            </td>
            <td>
              {channel.serviceOrigin !== null ? (
                <Truncated text={channel.serviceOrigin} className="endpoint" />
              ) : (
                <code title={channel.payee}>{channel.payee.slice(0, 8)}…</code>
              )}
            </td>
            <td>
              <ProtocolBadge protocol={channel.protocol} />
            </td>
            <td>
              <ChannelStatusBadge channel={channel} />
            </td>
            <td className="num" data-testid="channel-deposit">
              <Amount value={channel.deposit} />
            </td>
            <td className="num" data-testid="channel-accepted">
              <Amount value={channel.accepted} />
            </td>
            <td className="num" data-testid="channel-settled">
              <Amount value={channel.settled} />
            </td>
            <td className="num">{channel.refunded === null ? <span className="muted">—</span> : <Amount value={channel.refunded} />}</td>
          </tr>
        ))}
      </TableState>
      {props.last && page?.hasNextPage === true && page.endCursor !== null ? (
        <tr>
          <td colSpan={9}>
            <button type="button" onClick={() => props.more(page.endCursor!)}>
              Show older channels
            </button>
          </td>
        </tr>
      ) : null}
    </tbody>
  );
}

export function ChannelView({ address }: { address: string }): ReactNode {
  const [after, setAfter] = useState<string | null>(null);
  const [{ data, fetching, error }, refetch] = useQuery<ChannelData>({ query: CHANNEL, variables: { address, first: PAGE, after } });
  const [reread] = useState(() => () => refetch({ requestPolicy: "network-only" }));
  const live = useChannelEvents(reread);
  const channel = data?.channel;
  return (
    <section aria-labelledby="view-title" data-live={live ? "on" : "off"}>
      <h1 id="view-title">
        Channel <code title={address}>{address.length > 16 ? `${address.slice(0, 8)}…${address.slice(-6)}` : address}</code>
      </h1>
      <p>
        <Link to={href("channels")}>All channels</Link>
      </p>
      <TableState
        what="the channel"
        error={error}
        fetching={fetching}
        loaded={data != null}
        empty={channel == null}
        emptyText="No channel of this account has this address."
        refetch={refetch}
      >
        {channel == null ? null : (
          <>
            <div className="totals" data-testid="channel-totals">
              <Total label="Deposit" value={channel.deposit} testid="channel-deposit" />
              <Total label="Accepted by the payee" value={channel.accepted} testid="channel-accepted" />
              <Total label="Settled on the ledger" value={channel.settled} testid="channel-settled" />
              <Total label="Accepted, not on chain yet" value={channel.acceptedUnsettled} testid="channel-unsettled" />
              {channel.refunded !== null ? <Total label="Refunded" value={channel.refunded} testid="channel-refunded" /> : null}
            </div>
            <dl className="facts">
              <dt>Status</dt>
              <dd>
                <ChannelStatusBadge channel={channel} />
                {channel.forced ? <span className="badge badge-warning">force-closed</span> : null}
              </dd>
              <dt>Agent</dt>
              <dd>
                <AgentLink agentId={channel.agentId} />
              </dd>
              <dt>Service</dt>
              <dd>{channel.serviceOrigin ?? <span className="muted">not opened through the gateway</span>}</dd>
              <dt>Payee</dt>
              <dd>
                <Truncated text={channel.payee} />
              </dd>
              <dt>Opened</dt>
              <dd>
                <Time iso={channel.openedAt} /> · <TxHash hash={channel.openTx} />
              </dd>
              <dt>Expires</dt>
              <dd>
                <Time iso={channel.expiresAt} />
              </dd>
              {channel.closeTx !== null ? (
                <>
                  <dt>Closed</dt>
                  <dd>
                    {channel.closedAt !== null ? <Time iso={channel.closedAt} /> : null} · <TxHash hash={channel.closeTx} />
                  </dd>
                </>
              ) : null}
            </dl>
            <h2>Charges</h2>
            {channel.charges.nodes.length === 0 ? (
              <Empty>No charge on this channel yet.</Empty>
            ) : (
              <DataTable
                testId="charges-table"
                caption="Charges of the channel, newest first"
                captionHidden
                wrap={false}
                columns={[
                  { head: "#", num: true },
                  { head: "Endpoint" },
                  { head: "Amount (USDC)", num: true },
                  { head: "Cumulative", num: true },
                  { head: "Status" },
                  { head: "Settlement" },
                ]}
              >
                {channel.charges.nodes.map((charge) => (
                  <tr key={charge.paymentId} data-testid="charge-row" data-payment-id={charge.paymentId} data-status={charge.status}>
                    <td className="num">{charge.sequence ?? <span className="muted">—</span>}</td>
                    <td>
                      <Truncated text={charge.endpoint} className="endpoint" />
                    </td>
                    <td className="num">
                      <Amount value={charge.amount} />
                    </td>
                    <td className="num">
                      {charge.cumulative === null ? <span className="muted">—</span> : <Amount value={charge.cumulative} />}
                    </td>
                    <td>
                      <ChargeBadge charge={charge} />
                    </td>
                    <td>
                      {charge.settlementTx === null ? (
                        <span className="muted">not on chain</span>
                      ) : (
                        <TxHash hash={charge.settlementTx} explorer={charge.solanaExplorer} />
                      )}
                    </td>
                  </tr>
                ))}
              </DataTable>
            )}
            <div className="pager">
              {after !== null ? (
                <button type="button" onClick={() => setAfter(null)}>
                  Newest charges
                </button>
              ) : null}
              {channel.charges.pageInfo.hasNextPage && channel.charges.pageInfo.endCursor !== null ? (
                <button type="button" onClick={() => setAfter(channel.charges.pageInfo.endCursor)}>
                  Older charges
                </button>
              ) : null}
            </div>
            <h2>Settlements</h2>
            {channel.settlements.length === 0 ? (
              <Empty>Nothing settled on the ledger yet.</Empty>
            ) : (
              <DataTable
                testId="settlements-table"
                caption="Settlements of the channel, newest first"
                captionHidden
                wrap={false}
                columns={[
                  { head: "Time" },
                  { head: "Transaction" },
                  { head: "Charges", num: true },
                  { head: "Paid (USDC)", num: true },
                  { head: "Cumulative", num: true },
                  { head: "Status" },
                ]}
              >
                {channel.settlements.map((settlement) => (
                  <tr key={settlement.txHash} data-testid="settlement-row">
                    <td>{settlement.timestamp === null ? <span className="muted">—</span> : <Time iso={settlement.timestamp} />}</td>
                    <td>
                      <TxHash hash={settlement.txHash} />
                    </td>
                    <td className="num">{settlement.chargeCount}</td>
                    <td className="num">
                      <Amount value={settlement.delta} />
                    </td>
                    <td className="num">
                      <Amount value={settlement.cumulative} />
                    </td>
                    <td>
                      <span className={`badge badge-${settlement.status}`}>{settlement.status}</span>
                    </td>
                  </tr>
                ))}
              </DataTable>
            )}
          </>
        )}
      </TableState>
    </section>
  );
}

function Total({ label, value, testid }: { label: string; value: string; testid: string }): ReactNode {
  return (
    <div className="total">
      <span className="label">{label}</span>
      <span className="value" data-testid={testid}>
        <Amount value={value} unit />
      </span>
    </div>
  );
}
