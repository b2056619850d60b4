/**
 * Opening a channel session (`POST /v1/agents/{agentId}/channels`): the deposit is the agent's
 * exposure, so it is reserved within its spend policy exactly as a payment is (the policy store's
 * `reserveInTransaction`, under the agent's lock: daily/period budget, domains, rate limit, and the
 * invocation's remaining budget under `parentTxHash`); only the per-call limit is left to each
 * charge (`exposure`). A refusal is recorded as a rejected payment and answered, nothing signed.
 *
 * Crash safety: open_channel is built and signed (authority + the agent's custodial key) before
 * the transaction that reserves and inserts the `opening` row commits with its signature and wire
 * bytes; then it is sent. Confirmed → `open` (with the account's opened slot, the voucher chain's
 * start); definitely failed (refused by the node, included with an error, expired) → `failed` and
 * the reservation released; unknown → the row stays `opening` and `resolveOpening` decides later
 * from the chain: the Channel account exists (open) or the signature can no longer land (failed).
 */
import { randomBytes } from "node:crypto";
import { createAssociatedTokenAccountIdempotentInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { PublicKey } from "@solana/web3.js";
import { withTransaction } from "../../../indexer/db/database.js";
import { channelAccounts, initialChargesDigest, openChannelInstruction } from "../../../programs/payment_ledger/ts/index.js";
import { refuseArchived } from "../../shared/http/input.js";
import type { PolicyRejected } from "../../shared/policy/engine.js";
import {
  channelRef,
  linkReservation,
  type ReservationRefusal,
  type ReserveOptions,
  releaseLinkedReservation,
} from "../reservations/store.js";
import type { AgentRow } from "../../shared/rows.js";
import { authorizeWithinPolicy } from "../payments/authorize.js";
import { lockAgentArchivedAt } from "../payments/agent-archive.js";
import { type InvocationReader, invocationBudgetCheck, requireSubAgentInvocation } from "../invocations/index.js";
import { httpError } from "../../shared/errors.js";
import { checkPayee, checkPayeeAccounts } from "../chain/payee.js";
import { failureText, ledgerRefusal, submitFailure } from "../chain/ledger-errors.js";
import { COMMITMENT, lookUpOutcomes, type SignedTransaction, submit } from "../chain/ledger.js";
import { readChannel, signChannelTransaction } from "./chain.js";
import type { ChannelDeps } from "./deps.js";
import { sessionAccounts } from "./deps.js";
import { channelPending, insufficientDeposit, openFailed } from "./errors.js";
import { findSession, insertOpeningSession, markOpened, markOpenFailed, type SessionRow, sessionByOpenReference } from "./store.js";

export const DEFAULT_EXPIRES_IN_SECONDS = 3_600;
export const DEFAULT_WITHDRAW_DELAY_SECONDS = 60;
export const MAX_EXPIRES_IN_SECONDS = 30 * 24 * 3_600;
export const MAX_WITHDRAW_DELAY_SECONDS = 30 * 24 * 3_600;

export interface OpenRequest {
  /** The caller's agent, found active. */
  readonly agent: AgentRow;
  readonly payee: string;
  /** `scheme://host[:port]`. */
  readonly serviceOrigin: string;
  readonly depositUnits: bigint;
  readonly protocol: "mpp" | "x402";
  readonly expiresInSeconds: number;
  readonly withdrawDelaySeconds: number;
  readonly parentTxHash: string | null;
  /** The Idempotency-Key's effect reference: a retry resumes the session it opened. */
  readonly reference: string | null;
}

export type OpenResult =
  | { readonly outcome: "opened"; readonly session: SessionRow }
  | { readonly outcome: "policy_violation"; readonly decision: PolicyRejected; readonly rejectionId: string }
  | {
      readonly outcome: "budget_exceeded";
      readonly refusal: ReservationRefusal;
      readonly parentTxHash: string | null;
      readonly rejectionId: string;
    };

export async function openSession(deps: ChannelDeps, request: OpenRequest, now: Date): Promise<OpenResult> {
  if (request.reference !== null) {
    const existing = await sessionByOpenReference(deps.pool, request.reference);
    if (existing !== null) return { outcome: "opened", session: await awaitOpening(deps, existing) };
  }
  const { agent, parentTxHash } = request;
  const { ledger } = deps;
  const payee = checkPayee(request.payee, [ledger.mint], "payee");
  const payer = await deps.keys.get(agent.agent_id);
  const invocation =
    parentTxHash === null ? null : (await requireSubAgentInvocation(requireReader(deps), parentTxHash, agent.wallet_address)).invocation;
  // Rule 2 of the payees (chain/payee.ts): a plain wallet, its token account of the Token program.
  const payeeToken = getAssociatedTokenAddressSync(ledger.mint, payee, true);
  const [wallet, token] = await ledger.connection.getMultipleAccountsInfo([payee, payeeToken], COMMITMENT);
  const { createTokenAccount } = checkPayeeAccounts(payee.toBase58(), {
    payee: wallet == null ? null : { owner: wallet.owner, executable: wallet.executable },
    tokenAccount: token == null ? null : { owner: token.owner },
  });
  const accounts = channelAccounts({
    programId: ledger.programId,
    payer: payer.publicKey,
    payee,
    mint: ledger.mint,
    channelId: randomBytes(32),
  });
  const expiresAt = new Date((Math.floor(now.getTime() / 1000) + request.expiresInSeconds) * 1000);
  const signed = await signChannelTransaction(
    ledger,
    [
      // The payee's token account must exist for any settlement to reach it; the authority pays
      // its rent once (idempotent, should it appear meanwhile).
      ...(createTokenAccount
        ? [createAssociatedTokenAccountIdempotentInstruction(ledger.authority.publicKey, payeeToken, payee, ledger.mint)]
        : []),
      await openChannelInstruction({
        authority: ledger.authority.publicKey,
        channel: accounts,
        depositUnits: request.depositUnits,
        expiresAt: BigInt(expiresAt.getTime() / 1000),
        withdrawDelaySeconds: BigInt(request.withdrawDelaySeconds),
        protocol: request.protocol,
        invocation: invocation === null ? null : new PublicKey(invocation),
      }),
    ],
    [payer],
  );
  const channel = accounts.channel.toBase58();
  const reserved = await withTransaction(
    deps.pool,
    async (client) => {
      refuseArchived({ public_id: agent.public_id, archived_at: await lockAgentArchivedAt(client, agent.agent_id) });
      const options: ReserveOptions = {
        exposure: true,
        ...(parentTxHash === null
          ? {}
          : invocationBudgetCheck({
              agentId: agent.agent_id,
              parentTxHash,
              amountUnits: request.depositUnits,
              readInvocation: async () => (await requireSubAgentInvocation(requireReader(deps), parentTxHash, agent.wallet_address)).state,
            })),
      };
      const authorization = await authorizeWithinPolicy(client, {
        agentId: agent.agent_id,
        endpoint: request.serviceOrigin,
        amountUnits: request.depositUnits,
        protocol: request.protocol,
        at: now,
        options,
      });
      if (authorization.outcome === "budget_exceeded") {
        const { refusal, rejectionId } = authorization;
        return { outcome: "budget_exceeded", refusal, parentTxHash, rejectionId } as const;
      }
      if (authorization.outcome === "policy_violation") return authorization;
      const { reservationId } = authorization;
      await insertOpeningSession(client, {
        channel,
        accountId: agent.account_id,
        agentId: agent.agent_id,
        payer: payer.publicKey.toBase58(),
        payee: payee.toBase58(),
        mint: ledger.mint.toBase58(),
        channelId: Buffer.from(accounts.channelId).toString("hex"),
        protocol: request.protocol,
        serviceOrigin: request.serviceOrigin,
        parentTxHash,
        invocation,
        depositUnits: request.depositUnits,
        expiresAt,
        withdrawDelaySeconds: request.withdrawDelaySeconds,
        reservationId: reservationId!,
        openReference: request.reference,
        openTx: signed.signature,
        openWire: signed.wire,
        openLastValidBlockHeight: signed.lastValidBlockHeight,
      });
      // Claimed from the start: the deposit leaves the wallet with open_channel, so `release`
      // must never free it; the close ends it at what the channel paid.
      await linkReservation(client, reservationId!, { paymentRef: channelRef(channel), parentTxHash, claimedAt: now });
      return null;
    },
    { isolation: "read committed" },
  );
  if (reserved !== null) return reserved;
  return { outcome: "opened", session: await sendOpen(deps, channel, signed) };
}

async function sendOpen(deps: ChannelDeps, channel: string, signed: SignedTransaction): Promise<SessionRow> {
  const result = await submit(deps.ledger, signed);
  if (result.status === "confirmed") return (await confirmOpen(deps, channel)) ?? unreachable(channel);
  if (result.status === "pending") throw channelPending(channel, "open_channel");
  const refusal = ledgerRefusal(submitFailure(result, signed), deps.ledger.programId);
  const detail = refusal === null ? failureText(result) : `${refusal.name}: ${refusal.message}`;
  await failOpen(deps, channel, detail);
  if (refusal?.name === "InsufficientFunds") throw insufficientDeposit(channel, detail);
  throw openFailed(channel, detail);
}

/** The channel account exists: the row becomes `open` with its opened slot. Null when it does not. */
async function confirmOpen(deps: ChannelDeps, channel: string): Promise<SessionRow | null> {
  const session = (await findSession(deps.pool, channel))!;
  const accounts = sessionAccounts(session, deps.ledger.programId);
  const state = await readChannel(deps.ledger, accounts.channel);
  if (state === null || Buffer.from(state.channelId).toString("hex") !== session.channelId) return null;
  await markOpened(deps.pool, channel, state.openedSlot, initialChargesDigest(accounts.channel, state.openedSlot));
  return (await findSession(deps.pool, channel))!;
}

async function failOpen(deps: ChannelDeps, channel: string, detail: string): Promise<void> {
  await withTransaction(deps.pool, async (client) => {
    if (await markOpenFailed(client, channel, detail)) await releaseLinkedReservation(client, channelRef(channel));
  });
}

/**
 * An `opening` session decided from the chain (its stored bytes re-sent first): the account exists
 * → open; the signature can never land (or landed failed) and no account → failed, reservation
 * released; else still opening.
 */
export async function resolveOpening(deps: ChannelDeps, session: SessionRow): Promise<SessionRow> {
  if (session.status !== "opening") return session;
  const opened = await confirmOpen(deps, session.channel);
  if (opened !== null) return opened;
  // The same signed bytes again: a crash may have come before they were sent; they land at most once.
  await deps.ledger.connection
    .sendRawTransaction(Buffer.from(session.openWire!, "base64"), { skipPreflight: true, maxRetries: 0 })
    .catch(() => undefined);
  const [outcome] = await lookUpOutcomes(deps.ledger, [
    { signature: session.openTx!, lastValidBlockHeight: session.openLastValidBlockHeight! },
  ]);
  if (outcome!.status === "confirmed") return (await confirmOpen(deps, session.channel)) ?? session;
  if (outcome!.status === "failed") {
    // Read the account once more after the verdict: a landing between the two reads wins.
    const late = await confirmOpen(deps, session.channel);
    if (late !== null) return late;
    await failOpen(deps, session.channel, outcome!.reason === "expired" ? "expired before it landed" : "included with an error");
  }
  return (await findSession(deps.pool, session.channel))!;
}

/** A retried open: the session it started, once the chain decided (re-sending the same bytes). */
async function awaitOpening(deps: ChannelDeps, session: SessionRow): Promise<SessionRow> {
  if (session.status !== "opening") {
    if (session.status === "failed") throw openFailed(session.channel, session.failure ?? "failed");
    return session;
  }
  const signed = { signature: session.openTx!, wire: session.openWire!, lastValidBlockHeight: session.openLastValidBlockHeight! };
  const result = await submit(deps.ledger, signed);
  if (result.status === "pending") throw channelPending(session.channel, "open_channel");
  const resolved = await resolveOpening(deps, session);
  if (resolved.status === "failed") throw openFailed(session.channel, resolved.failure ?? "failed");
  if (resolved.status === "opening") throw channelPending(session.channel, "open_channel");
  return resolved;
}

function requireReader(deps: ChannelDeps): InvocationReader {
  if (deps.invocations === undefined) throw httpError("SERVICE_UNAVAILABLE", "agent invocations are not configured on this server");
  return deps.invocations;
}

function unreachable(channel: string): never {
  throw new Error(`open_channel ${channel} confirmed but its account is absent`);
}
