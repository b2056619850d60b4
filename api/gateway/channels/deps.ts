/**
 * What the channel use cases share: the database, the ledger (whose authority is the program's
 * `config.authority`: it co-signs opens and settles for payees), the custodial wallets, the
 * invocation reader for sessions under a parent, and the in-memory caches of one process.
 */
import { createPrivateKey, sign } from "node:crypto";
import type { Keypair, PublicKey } from "@solana/web3.js";
import type pg from "pg";
import { type ChannelAccounts, channelAccounts } from "../../../programs/payment_ledger/ts/index.js";
import type { InvocationReader } from "../invocations/index.js";
import { parseAddress, type SettlementLedger } from "../chain/ledger.js";
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

/** An agent's key, ready to sign vouchers: the node:crypto key object is built once. */
export interface VoucherSigner {
  readonly keypair: Keypair;
  sign(message: Uint8Array): Uint8Array;
}

// The DER prefix that turns a raw ed25519 seed into the PKCS#8 form node:crypto reads.
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

/**
 * Decrypted wallet keys of agents with open channels, by agent id: a voucher is signed on every
 * paid request, so the key is opened once per process, not per charge (measured: opening it costs
 * ~0.5 ms, building the node:crypto key object ~0.6 ms under load; signing with a built one is
 * what remains). Bounded; the oldest entry goes first. Keys never leave the process.
 */
export class SigningKeys {
  readonly #keys = new Map<string, VoucherSigner>();

  constructor(
    private readonly wallets: Pick<AgentWallets, "keypair">,
    private readonly capacity = 10_000,
  ) {}

  async get(agentId: string): Promise<Keypair> {
    return (await this.signer(agentId)).keypair;
  }

  async signer(agentId: string): Promise<VoucherSigner> {
    const cached = this.#keys.get(agentId);
    if (cached !== undefined) return cached;
    const keypair = await this.wallets.keypair(agentId);
    const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, keypair.secretKey.subarray(0, 32)]), format: "der", type: "pkcs8" });
    const signer: VoucherSigner = { keypair, sign: (message) => new Uint8Array(sign(null, message, key)) };
    if (this.#keys.size >= this.capacity) this.#keys.delete(this.#keys.keys().next().value!);
    this.#keys.set(agentId, signer);
    return signer;
  }
}

/** The program accounts of a stored session, in the program at `programId`. */
export function sessionAccounts(
  session: Pick<SessionRow, "payer" | "payee" | "mint" | "channelId">,
  programId: PublicKey,
): ChannelAccounts {
  return channelAccounts({
    programId,
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
