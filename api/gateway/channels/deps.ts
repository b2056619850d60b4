/**
 * What the channel use cases share: the database, the ledger (whose authority is the program's
 * `config.authority`: it co-signs opens and settles for payees), the custodial wallets, the
 * invocation reader for sessions under a parent, and the in-memory caches of one process.
 */
import type { Keypair, PublicKey } from "@solana/web3.js";
import type pg from "pg";
import { type ChannelAccounts, channelAccounts } from "../../../programs/payment_ledger/ts/index.js";
import type { InvocationReader } from "../invocations/index.js";
import { parseAddress, type SettlementLedger } from "../wallets/ledger.js";
import type { AgentWallets } from "../wallets/wallets.js";
import type { SessionRow } from "./store.js";

export interface ChannelDeps {
  readonly pool: pg.Pool;
  readonly ledger: SettlementLedger;
  readonly wallets: Pick<AgentWallets, "keypair">;
  /** Reads invocation accounts for sessions under a parent; without it such sessions are refused. */
  readonly invocations?: InvocationReader | undefined;
  readonly keys: SigningKeys;
}

/**
 * Decrypted wallet keys of agents with open channels, by agent id: a voucher is signed on every
 * paid request, so the key is opened once per process, not per charge. Bounded; the oldest entry
 * goes first. Keys never leave the process.
 */
export class SigningKeys {
  readonly #keys = new Map<string, Keypair>();

  constructor(
    private readonly wallets: Pick<AgentWallets, "keypair">,
    private readonly capacity = 10_000,
  ) {}

  async get(agentId: string): Promise<Keypair> {
    const cached = this.#keys.get(agentId);
    if (cached !== undefined) return cached;
    const keypair = await this.wallets.keypair(agentId);
    if (this.#keys.size >= this.capacity) this.#keys.delete(this.#keys.keys().next().value!);
    this.#keys.set(agentId, keypair);
    return keypair;
  }
}

/** The program accounts of a stored session. */
export function sessionAccounts(session: Pick<SessionRow, "payer" | "payee" | "mint" | "channelId">): ChannelAccounts {
  return channelAccounts({
    payer: parseAddress(session.payer, "payer"),
    payee: parseAddress(session.payee, "payee"),
    mint: parseAddress(session.mint, "mint"),
    channelId: Buffer.from(session.channelId, "hex"),
  });
}

export function optionalKey(address: string | null): PublicKey | null {
  return address === null ? null : parseAddress(address, "invocation");
}

/**
 * One chain of work per channel in this process: settlements and the close of a channel run one
 * after the other (the database row lock and the one-pending rule guard across processes).
 */
export class ChannelQueue {
  readonly #tails = new Map<string, Promise<unknown>>();

  run<T>(channel: string, work: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(channel) ?? Promise.resolve();
    const next = previous.then(work, work);
    const tail = next.catch(() => undefined);
    this.#tails.set(channel, tail);
    void tail.then(() => {
      if (this.#tails.get(channel) === tail) this.#tails.delete(channel);
    });
    return next;
  }
}
