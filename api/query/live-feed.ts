/**
 * The live feed: ONE dedicated Postgres connection LISTENs on `ledger_transactions` (the indexer
 * notifies `{"txHash","agent","slot"}` after each committed batch, `agent` = payer wallet) and on
 * `ledger_channels` (channel events: `{"channel","event","txHash","agent","slot"}`), maps the payer
 * to its account, and fans out in memory to that account's subscribers only. Replicas each hold
 * their own listener (Postgres does the cross-replica fan-out).
 */
import { createPubSub } from "graphql-yoga";
import pg from "pg";
import type { Logger } from "pino";

export const FEED_CHANNEL = "ledger_transactions";
/** indexer/store/channels.ts LEDGER_CHANNELS_CHANNEL (api/ and indexer/ share no code). */
export const CHANNEL_FEED_CHANNEL = "ledger_channels";
const RECONNECT_MS = 1_000;

export const CHANNEL_EVENT_NAMES = [
  "ChannelOpened",
  "ChannelToppedUp",
  "ChannelSettled",
  "ChannelCloseRequested",
  "ChannelClosed",
] as const;
export type ChannelEventName = (typeof CHANNEL_EVENT_NAMES)[number];

/** A payment recorded (a ledger transaction), or an event of a payment channel. */
export type FeedEvent =
  | { readonly kind: "transaction"; readonly txHash: string; readonly agentId: string; readonly slot: string }
  | {
      readonly kind: "channel";
      readonly channel: string;
      readonly event: ChannelEventName;
      readonly txHash: string;
      readonly agentId: string;
      readonly slot: string;
    };

type Topics = Record<string, [FeedEvent]>;

export class LiveFeed {
  private readonly pubSub = createPubSub<Topics>();
  private client: pg.Client | null = null;
  private stopped = false;
  private started: Promise<void> | null = null;
  /**
   * Notifications are dispatched one after another, in the order Postgres delivered them (commit
   * order): each needs an owner lookup, and concurrent lookups could finish out of order (a
   * channel's close published before its close request).
   */
  private dispatching: Promise<void> = Promise.resolve();

  constructor(
    private readonly pool: pg.Pool,
    private readonly connectionString: string,
    private readonly logger?: Logger,
  ) {}

  /** Starts listening (idempotent); resolves once LISTEN is in place. */
  start(): Promise<void> {
    this.started ??= this.connect();
    return this.started;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString });
    let lost = false;
    const onLost = (error?: Error): void => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = null;
      client.end().catch(() => undefined);
      if (this.stopped) return;
      this.logger?.warn({ err: error }, "live feed connection lost; reconnecting");
      this.scheduleReconnect();
    };
    client.on("notification", (message) => {
      const { channel, payload } = message;
      if (payload === undefined || (channel !== FEED_CHANNEL && channel !== CHANNEL_FEED_CHANNEL)) return;
      // A failed dispatch must not stop the ones after it.
      this.dispatching = this.dispatching
        .then(() => this.dispatch(channel, payload))
        .catch((error: unknown) => this.logger?.warn({ err: error }, "live feed: dispatch failed"));
    });
    client.on("error", onLost);
    client.on("end", () => onLost());
    await client.connect();
    // Payments last: pg_stat_activity shows a connection's last statement, and operators (and the
    // reconnect test) find the feed's listener by `LISTEN ledger_transactions`.
    await client.query(`LISTEN ${CHANNEL_FEED_CHANNEL}`);
    await client.query(`LISTEN ${FEED_CHANNEL}`);
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
  }

  private scheduleReconnect(): void {
    setTimeout(() => {
      if (this.stopped) return;
      this.started = this.connect().catch((error: unknown) => {
        this.logger?.warn({ err: error }, "live feed reconnect failed; retrying");
        this.scheduleReconnect();
      });
    }, RECONNECT_MS).unref();
  }

  private async dispatch(channel: string, payload: string): Promise<void> {
    let parsed: { txHash?: unknown; agent?: unknown; slot?: unknown; channel?: unknown; event?: unknown };
    try {
      parsed = JSON.parse(payload) as typeof parsed;
    } catch {
      this.logger?.warn({ payload }, "live feed: payload is not JSON");
      return;
    }
    if (typeof parsed.txHash !== "string" || typeof parsed.agent !== "string") {
      this.logger?.warn({ payload }, "live feed: payload lacks txHash or agent");
      return;
    }
    const isChannel = channel === CHANNEL_FEED_CHANNEL;
    if (isChannel && (typeof parsed.channel !== "string" || !CHANNEL_EVENT_NAMES.includes(parsed.event as ChannelEventName))) {
      this.logger?.warn({ payload }, "live feed: channel payload lacks channel or a known event");
      return;
    }
    try {
      const result = await this.pool.query<{ agent_id: string; account_id: string }>(
        "SELECT agent_id, account_id FROM agents WHERE wallet_address = $1",
        [parsed.agent],
      );
      const owner = result.rows[0];
      // A payer no account registered belongs to nobody's feed.
      if (owner === undefined) return;
      const common = {
        txHash: parsed.txHash,
        // The internal key: only compared with requireAgent's key, never answered (api/shared/agent-ids.ts).
        agentId: owner.agent_id,
        slot: typeof parsed.slot === "string" ? parsed.slot : String(parsed.slot ?? ""),
      };
      this.pubSub.publish(
        topic(owner.account_id),
        isChannel
          ? { kind: "channel", channel: parsed.channel as string, event: parsed.event as ChannelEventName, ...common }
          : { kind: "transaction", ...common },
      );
    } catch (error) {
      this.logger?.warn({ err: error }, "live feed: owner lookup failed");
    }
  }

  /** The events of one account, as an async iterable ending when the subscriber leaves. */
  subscribe(accountId: string): AsyncIterable<FeedEvent> {
    return this.pubSub.subscribe(topic(accountId));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.started?.catch(() => undefined);
    const client = this.client;
    this.client = null;
    if (client !== null) await client.end().catch(() => undefined);
  }
}

function topic(accountId: string): string {
  return `account:${accountId}`;
}
