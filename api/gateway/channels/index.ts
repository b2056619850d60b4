/**
 * Channel sessions (docs/protocols.md "Channel sessions"): the gateway's half of a
 * payment channel of payment_ledger. The gateway is the agent's custodian (it signs vouchers with
 * the agent's wallet key) and the program's authority (it co-signs opens and settles for payees).
 *
 * | concept | module |
 * |---|---|
 * | open: deposit reserved within the policy, open_channel sent and confirmed | open.ts |
 * | a charge: policy checks, payment id, voucher signed, row inserted | vouchers.ts |
 * | a payee's presentation, settlement batches, crash reconciliation | settle.ts |
 * | close: settle, close request, refund or force close, reservation ended | close.ts |
 * | the channel's money as the chain's events recorded it | history.ts |
 * | SQL | store.ts |
 *
 * `ChannelSessions` wires them with the per-process caches (signing keys, one queue per channel)
 * and runs the loop that finishes what requests left open: opens of unknown outcome, pending
 * settlements, accepted charges not yet settled (so the payer cannot force-close them away after
 * expiry), expired sessions (closed and refunded: the deposit does not stay locked), and closes
 * waiting for their withdraw delay.
 */
import type { PublicKey } from "@solana/web3.js";
import { setTimeout as delay } from "node:timers/promises";
import type pg from "pg";
import type { InvocationReader } from "../invocations/index.js";
import type { SettlementLedger } from "../chain/ledger.js";
import type { AgentWallets } from "../wallets/wallets.js";
import { advanceClose, closeSession } from "./close.js";
import { ChannelQueue, type ChannelDeps, SigningKeys } from "./deps.js";
import { type OpenRequest, type OpenResult, openSession, resolveOpening } from "./open.js";
import { acceptPresentation, MAX_BATCHES_PER_REQUEST, type Presentation, settleAccepted } from "./settle.js";
import { confirmedSettlementTxs, findSession, type SessionRow, sessionsNeedingWork } from "./store.js";
import { type ChargeRequest, type ChargeResult, signCharge } from "./vouchers.js";

export * from "./errors.js";
export type { OpenRequest, OpenResult } from "./open.js";
export { DEFAULT_EXPIRES_IN_SECONDS, DEFAULT_WITHDRAW_DELAY_SECONDS, MAX_EXPIRES_IN_SECONDS, MAX_WITHDRAW_DELAY_SECONDS } from "./open.js";
export type { PresentedCharge, Presentation } from "./settle.js";
export { MAX_CHARGES_PER_SETTLEMENT } from "./settle.js";
export type { SessionRow } from "./store.js";
export type { ChargeRequest, ChargeResult, SignedCharge } from "./vouchers.js";

export interface ChannelSessionsOptions {
  readonly pool: pg.Pool;
  readonly ledger: SettlementLedger;
  readonly wallets: Pick<AgentWallets, "keypair">;
  readonly invocations?: InvocationReader | undefined;
}

export interface PresentationResult {
  readonly session: SessionRow;
  readonly settlementTxs: readonly string[];
}

/** Sessions one loop pass looks at. */
const PASS_LIMIT = 100;

export class ChannelSessions {
  readonly #deps: ChannelDeps;
  readonly #queue = new ChannelQueue();

  constructor(options: ChannelSessionsOptions) {
    this.#deps = {
      pool: options.pool,
      ledger: options.ledger,
      wallets: options.wallets,
      invocations: options.invocations,
      keys: new SigningKeys(options.wallets),
    };
  }

  /** The program the channels live in (PROGRAM_ID). */
  get programId(): PublicKey {
    return this.#deps.ledger.programId;
  }

  open(request: OpenRequest, now: Date): Promise<OpenResult> {
    return openSession(this.#deps, request, now);
  }

  /** The session as its payer's account sees it; null for none, or another account's. */
  async session(channel: string, accountId: string): Promise<SessionRow | null> {
    const session = await findSession(this.#deps.pool, channel);
    return session === null || session.accountId !== accountId ? null : session;
  }

  sign(request: ChargeRequest, now: Date): Promise<ChargeResult> {
    return signCharge(this.#deps, request, now);
  }

  /**
   * A payee's presentation: checked, accepted, then settled on chain before answering (up to
   * `MAX_BATCHES_PER_REQUEST` batches; the loop settles what a larger one leaves).
   */
  async present(presentation: Presentation): Promise<PresentationResult> {
    await acceptPresentation(this.#deps, presentation);
    await this.#queue.run(presentation.channel, async () => {
      const report = await settleAccepted(this.#deps, presentation.channel, true, MAX_BATCHES_PER_REQUEST);
      // Recorded now if the chain's record is readable; otherwise the loop finishes it.
      if (report.gone === true) await this.#finishEnded(presentation.channel).catch(() => undefined);
    });
    return {
      session: (await findSession(this.#deps.pool, presentation.channel))!,
      settlementTxs: await confirmedSettlementTxs(this.#deps.pool, presentation.channel),
    };
  }

  close(channel: string, accountId: string): Promise<SessionRow> {
    return this.#queue.run(channel, () => closeSession(this.#deps, channel, accountId));
  }

  settlementTxs(channel: string): Promise<string[]> {
    return confirmedSettlementTxs(this.#deps.pool, channel);
  }

  /** A session whose channel was ended on chain by someone else: recorded from the chain's close. */
  async #finishEnded(channel: string): Promise<void> {
    const current = (await findSession(this.#deps.pool, channel))!;
    if (current.status === "open" || current.status === "closing") await advanceClose(this.#deps, current, false);
  }

  /**
   * One pass of the loop: opens of unknown outcome decided, pending and accepted settlements
   * sent or resolved, closes advanced (refunded once their delay passed). Errors of one session
   * are reported and do not stop the others.
   */
  async runPass(onError: (error: unknown, channel: string) => void = () => undefined): Promise<number> {
    const sessions = await sessionsNeedingWork(this.#deps.pool, PASS_LIMIT);
    for (const session of sessions) {
      try {
        await this.#queue.run(session.channel, async () => {
          const current = (await findSession(this.#deps.pool, session.channel))!;
          if (current.status === "opening") await resolveOpening(this.#deps, current);
          else if (current.status === "closing") await advanceClose(this.#deps, current, false);
          else if (current.status === "open" && current.expiresAt.getTime() < Date.now()) await advanceClose(this.#deps, current, false);
          else if (current.status === "open" && (await settleAccepted(this.#deps, current.channel, false)).gone === true) {
            await this.#finishEnded(current.channel);
          }
        });
      } catch (error) {
        onError(error, session.channel);
      }
    }
    return sessions.length;
  }
}

/** Runs `runPass` every `intervalMs` until `signal` aborts. */
export async function runChannelLoop(
  sessions: ChannelSessions,
  options: { readonly signal: AbortSignal; readonly intervalMs?: number; readonly onError?: (error: unknown, channel?: string) => void },
): Promise<void> {
  const intervalMs = options.intervalMs ?? 2_000;
  while (!options.signal.aborted) {
    try {
      await sessions.runPass((error, channel) => options.onError?.(error, channel));
    } catch (error) {
      options.onError?.(error);
    }
    await delay(intervalMs, undefined, { signal: options.signal }).catch(() => undefined);
  }
}
