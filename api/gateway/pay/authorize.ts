/**
 * Authorizing a payment for an agent (spec 4.7 `pay` steps 2–5, done by the gateway for the
 * client). It sits above the protocols because it chooses among them: x402 by default (spec 1;
 * the request's or the policy's `protocolPreference`), the spec's formats before real x402 / MPP
 * offers. The spend policy decides and the amount is reserved, then the agent's key signs: an
 * x402 payload, an MPP submission, or a transfer for a real payee (api/gateway/transfers). The
 * reservation is linked to the signed payment in the same transaction, so its settler closes it
 * and the sweeper releases it once unused; a signed transfer's link is claimed from the start
 * (its bytes may land until their blockhash expires). A policy refusal or a sub-agent's breach of
 * its invocation budget is recorded and returned, not thrown, so that it commits.
 *
 * Approvals (docs/policy.md "Approvals"): a payment the policy holds for a person is reserved
 * `pending_approval` and recorded as an approval (api/gateway/payments/approvals), nothing signed
 * (`held`). The same request repeated with the same Idempotency-Key resumes it: still held, the
 * typed refusal once denied or expired (`closed`), or, once approved and allowed by the re-check,
 * signed on the held reservation as any authorization.
 *
 * Two steps, because the REST layer runs the second inside the Idempotency-Key's transaction:
 * `prepareAuthorization` (reads that need no transaction; refusing here reserves nothing) and
 * `authorizeInTransaction`. Refusals the request itself causes are thrown as ServiceError.
 */
import type { Keypair } from "@solana/web3.js";
import type pg from "pg";
import type { Approval } from "../../shared/approvals/approval.js";
import { findApprovalByIdempotencyKey } from "../../shared/approvals/store.js";
import { badRequest, httpError, type ServiceError } from "../../shared/errors.js";
import { refuseArchived } from "../../shared/http/input.js";
import { type BudgetState, chooseProtocol, type PolicyRejected } from "../../shared/policy/engine.js";
import { EMPTY_POLICY, type Protocol, type ProtocolPreference } from "../../shared/policy/policy.js";
import { getPolicyLockingAgent } from "../../shared/policy/store.js";
import { linkReservation, mppPaymentRef, type ReservationRefusal, type ReserveOptions, x402PaymentRef } from "../reservations/store.js";
import type { AgentRow } from "../../shared/rows.js";
import { authorizeWithinPolicy } from "../payments/authorize.js";
import { type ApprovalLinks, holdPayment, resumeApproval } from "../payments/approvals/index.js";
import { invocationBudgetCheck, type Invocations, requireInvocations, requireSubAgentInvocation } from "../invocations/index.js";
import { chooseMethod } from "../mpp/rails.js";
import type { MppPaymentRequest } from "../mpp/request.js";
import { type MppSubmission, signMppSubmission } from "../mpp/submission.js";
import { checkPayee } from "../chain/payee.js";
import {
  insertTransfer,
  paymentHeaders,
  type SignedTransfers,
  type TransferChainState,
  type TransferFormat,
  type TransferOffer,
  transferPaymentRef,
} from "../transfers/index.js";
import type { AgentWallets } from "../wallets/index.js";
import type { PaymentPayload } from "../x402/payload.js";
import type { PaymentRequirement } from "../x402/requirement.js";
import { signPaymentPayload } from "../x402/sign.js";
import { type AgentSigner, keypairSigner } from "../chain/signer.js";

/**
 * The target's 402 offer: its x402 requirement (spec 2.7), its MPP request (spec 2.9), and the
 * real-protocol offers payable with a signed transfer (x402 v2/v1 `exact`, MPP `solana` charge,
 * in the payee's order); any of them may be absent.
 */
export interface Offer {
  readonly x402: PaymentRequirement | null;
  readonly mpp: MppPaymentRequest | null;
  readonly transfers?: readonly TransferOffer[];
}

export interface AuthorizeRequest {
  /** The caller's agent, found active. */
  readonly agent: AgentRow;
  /** The endpoint the agent called (an http(s) URL). */
  readonly endpoint: string;
  readonly offer: Offer;
  /** The request's preference; the policy's when absent. */
  readonly preference: ProtocolPreference | undefined;
  /** The invoking transaction when the agent pays as a sub-agent, else null. */
  readonly parentTxHash: string | null;
  /** The budget of the invocation this payment starts (x402 only), else null. */
  readonly invocationBudgetUnits: bigint | null;
  /** The request's Idempotency-Key: a held payment is tied to it, and a repeat resumes it. */
  readonly idempotencyKey?: string | null;
}

export interface AuthorizeDeps {
  /** Custodial wallets (the agent's key, the payee's agent); 503 without them. */
  readonly wallets: AgentWallets | undefined;
  /** Invocation accounts, read for sub-agent payments; 503 without them when one is named. */
  readonly invocations: Invocations | undefined;
  /** Real-protocol payments (signed transfers); 503 without them when the offer holds only such offers. */
  readonly transfers?: SignedTransfers | undefined;
  /** Signs the one-time links of held payments; a policy that holds one answers 503 without it. */
  readonly approvals?: ApprovalLinks | undefined;
}

/** A request checked against the wallets and the chain, with the agent's signer: ready to reserve. */
export interface PreparedAuthorization {
  readonly request: AuthorizeRequest;
  readonly deps: AuthorizeDeps;
  readonly signer: AgentSigner;
  /** The agent's opened key, which a signed transfer is made with (`signer` is over it). */
  readonly keypair: Keypair;
  /** The invocation a sub-agent pays under (found on the chain), else null. */
  readonly invocation: string | null;
  /** The chain state a signed transfer needs, read when the offer holds transfer offers. */
  readonly transferChain: TransferChainState | null;
}

/** The signed payment an authorization answers with. */
export type SignedPayment =
  | { readonly protocol: "x402"; readonly payload: PaymentPayload }
  | {
      readonly protocol: "mpp";
      readonly method: string;
      readonly paymentEndpoint: string;
      readonly submission: MppSubmission;
    }
  | {
      /** A signed transfer for a real x402 / MPP payee, and the headers that carry it. */
      readonly protocol: "transfer";
      readonly paymentProtocol: Protocol;
      readonly format: TransferFormat;
      readonly headers: Record<string, string>;
      readonly payTo: string;
      readonly feePayer: string;
      readonly lastValidBlockHeight: number;
    };

export interface Authorized {
  readonly outcome: "authorized";
  readonly reservationId: string;
  /** The policy version the payment was authorized under (docs/policy.md "Versions"); on an approved payment's resume, the re-check's. */
  readonly policyVersion?: number;
  readonly protocol: Protocol;
  readonly amountUnits: bigint;
  readonly budgetState: BudgetState;
  readonly parentTxHash: string | null;
  readonly invocation: string | null;
  readonly invocationBudgetUnits: bigint | null;
  readonly signed: SignedPayment;
}

/** A refusal recorded as a rejected payment (`rejectionId`); committed with the request. */
export type AuthorizeRefusal =
  | {
      readonly outcome: "budget_exceeded";
      readonly refusal: ReservationRefusal;
      readonly parentTxHash: string | null;
      readonly invocation: string | null;
      readonly rejectionId: string;
    }
  | {
      readonly outcome: "policy_violation";
      readonly decision: PolicyRejected;
      readonly rejectionId: string;
      readonly policyVersion: number;
    };

/** A payment held for a person (nothing signed), or one a person or the clock decided against. */
export type AuthorizeHeld =
  | { readonly outcome: "held"; readonly approval: Approval }
  | { readonly outcome: "closed"; readonly error: ServiceError };

export type AuthorizeResult = Authorized | AuthorizeRefusal | AuthorizeHeld;

/** What the payment will be made with. */
type Choice = { readonly kind: "x402" } | { readonly kind: "mpp" } | { readonly kind: "transfer"; readonly offer: TransferOffer };

/**
 * Spec 1 (x402 when both protocols are offered, unless the preference says mpp), applied first to
 * the offers in the spec's formats and, only when there are none, to the real-protocol offers
 * (the payee's first payable one of the chosen protocol).
 */
function choosePayment(offer: Offer, preference: ProtocolPreference): Choice {
  // The spec's own formats come first: the gateway settles and records them atomically, and a
  // payee that serves them (our middlewares, which also advertise the real protocols' headers)
  // is paid as it always was. Real-protocol offers are paid only when no spec format is offered.
  const spec: Protocol[] = [];
  if (offer.x402 !== null) spec.push("x402");
  if (offer.mpp !== null) spec.push("mpp");
  if (spec.length > 0) {
    const protocol = chooseProtocol(preference, spec);
    if (protocol !== null) return { kind: protocol };
  }
  const transfers = offer.transfers ?? [];
  const offered = [...new Set(transfers.map((t) => t.protocol))];
  // The policy engine's rule (spec 1); the route has refused a body that offers nothing.
  const protocol = chooseProtocol(preference, offered);
  if (protocol === null) throw new Error("authorize: no protocol offered, which the route refuses earlier");
  return { kind: "transfer", offer: transfers.find((t) => t.protocol === protocol)! };
}

/**
 * The checks that need no transaction: the invoked payee is another agent of this gateway, the
 * invocation a sub-agent pays under exists (404 fast; checked again under the lock), and the
 * agent's key. Nothing is written.
 */
export async function prepareAuthorization(deps: AuthorizeDeps, request: AuthorizeRequest): Promise<PreparedAuthorization> {
  const { agent, offer, parentTxHash, invocationBudgetUnits } = request;
  const wallets = deps.wallets;
  if (wallets === undefined) throw httpError("SERVICE_UNAVAILABLE", "wallets are not configured on this server");
  if (invocationBudgetUnits !== null) {
    const subAgentId = await wallets.agentIdForAddress(offer.x402!.payTo);
    if (subAgentId === null)
      throw badRequest("invocationBudget", `payTo ${offer.x402!.payTo} is not the wallet of an agent of this gateway`);
    if (subAgentId === agent.agent_id) throw badRequest("invocationBudget", "an agent cannot invoke itself");
  }
  const invocation =
    parentTxHash === null
      ? null
      : (await requireSubAgentInvocation(requireInvocations(deps.invocations), parentTxHash, agent.wallet_address)).invocation;
  const keypair = await wallets.keypair(agent.agent_id);
  let transferChain: TransferChainState | null = null;
  if ((offer.transfers ?? []).length > 0) {
    if (deps.transfers === undefined)
      throw httpError("SERVICE_UNAVAILABLE", "payments to x402 / MPP servers are not configured on this server");
    transferChain = await deps.transfers.chainState(keypair);
  }
  return { request, deps, signer: keypairSigner(keypair), keypair, invocation, transferChain };
}

/**
 * Inside the caller's READ COMMITTED transaction: the policy decision and the reservation (or the
 * recorded refusal), the signature, and the reservation's link to the signed payment.
 */
export async function authorizeInTransaction(client: pg.PoolClient, prepared: PreparedAuthorization, now: Date): Promise<AuthorizeResult> {
  const { request, invocation } = prepared;
  const { agent, endpoint, offer, parentTxHash, invocationBudgetUnits } = request;
  // Again under a share lock: an archive committed since the caller found the agent wins, and one
  // that starts now waits for this reservation and then sees it (api/gateway/payments/agent-archive.ts).
  const locked = await getPolicyLockingAgent(client, agent.agent_id);
  refuseArchived({ public_id: agent.public_id, archived_at: locked.archivedAt });
  const policy = locked.policy ?? EMPTY_POLICY;
  const choice = choosePayment(offer, request.preference ?? policy.protocolPreference);
  const protocol: Protocol = choice.kind === "transfer" ? choice.offer.protocol : choice.kind;
  if (invocationBudgetUnits !== null && choice.kind !== "x402") {
    throw badRequest(
      "invocationBudget",
      `invoking a sub-agent needs the spec's x402 protocol, but this payment would use ${choice.kind === "transfer" ? choice.offer.format : protocol}`,
    );
  }
  const amountUnits =
    choice.kind === "transfer" ? choice.offer.amountUnits : protocol === "x402" ? offer.x402!.amountUnits : offer.mpp!.amountUnits;
  if (choice.kind === "transfer") checkTransferOffer(prepared, choice.offer);
  // Any error rolls the caller's whole transaction back (the route answers it), so no savepoint.
  const checked: ReserveOptions = {
    savepoint: false,
    ...(parentTxHash === null
      ? {}
      : invocationBudgetCheck({
          agentId: agent.agent_id,
          parentTxHash,
          amountUnits,
          // 404 when the invocation is gone since `prepareAuthorization` found it.
          readInvocation: async () =>
            (await requireSubAgentInvocation(requireInvocations(prepared.deps.invocations), parentTxHash, agent.wallet_address)).state,
        })),
  };
  const common = { protocol, amountUnits, parentTxHash, invocation, invocationBudgetUnits } as const;
  const idempotencyKey = request.idempotencyKey ?? null;
  // A held payment's key: this is a resume, never a second payment.
  const held = idempotencyKey === null ? null : await findApprovalByIdempotencyKey(client, agent.account_id, idempotencyKey);
  if (held !== null) {
    const step = await resumeApproval(client, held, { agentKey: agent.agent_id, endpoint, amountUnits }, now);
    if (step.kind === "held") return { outcome: "held", approval: step.approval };
    if (step.kind === "closed") return { outcome: "closed", error: step.error };
    const resumed = {
      outcome: "authorized",
      reservationId: step.reservationId,
      ...(step.policyVersion === null ? {} : { policyVersion: step.policyVersion }),
      budgetState: step.budgetState,
      ...common,
    } as const;
    return signReserved(client, prepared, choice, resumed, now);
  }
  // The spec's formats are signed under the agent's lock once allowed, and the reservation's
  // INSERT carries the link; a transfer (more rows of its own) is signed and linked after it.
  const spec: { signed: SpecSigned | null } = { signed: null };
  const options: ReserveOptions =
    choice.kind === "transfer"
      ? checked
      : {
          ...checked,
          link: async () => {
            spec.signed = await signSpecPayment(prepared, protocol, now);
            return { ...spec.signed.link, parentTxHash, invocationBudgetUnits };
          },
        };
  const authorization = await authorizeWithinPolicy(client, {
    agentId: agent.agent_id,
    endpoint,
    amountUnits,
    protocol,
    at: now,
    options,
    hold: { parentTxHash },
  });
  if (authorization.outcome === "budget_exceeded") {
    const { refusal, rejectionId } = authorization;
    return { outcome: "budget_exceeded", refusal, parentTxHash, invocation, rejectionId };
  }
  if (authorization.outcome === "policy_violation") return authorization;
  if (authorization.outcome === "held") {
    const approval = await holdPayment(client, prepared.deps.approvals ?? { box: undefined }, {
      accountId: agent.account_id,
      agentKey: agent.agent_id,
      reservationId: authorization.reservationId,
      idempotencyKey,
      amountUnits,
      endpoint,
      decision: authorization.decision,
      now,
      policyVersion: authorization.policyVersion,
    });
    return { outcome: "held", approval };
  }
  const { decision, reservationId, policyVersion } = authorization;
  const authorized = { outcome: "authorized", reservationId, policyVersion, budgetState: decision.budget.state, ...common } as const;
  if (choice.kind === "transfer") return signReserved(client, prepared, choice, authorized, now);
  if (spec.signed === null) throw new Error("authorize: the reservation was made without signing its payment");
  return { ...authorized, signed: spec.signed.signed };
}

/**
 * The agent signs the payment of an open reservation (a transfer, or a held payment resumed once
 * approved) and the reservation is linked to it.
 */
async function signReserved(
  client: pg.PoolClient,
  prepared: PreparedAuthorization,
  choice: Choice,
  authorized: Omit<Authorized, "signed">,
  now: Date,
): Promise<Authorized> {
  const { reservationId, protocol, parentTxHash, invocationBudgetUnits } = authorized;
  const link = { parentTxHash, invocationBudgetUnits };
  if (choice.kind === "transfer") {
    return { ...authorized, signed: await signOfferedTransfer(client, prepared, choice.offer, authorized, now) };
  }
  const { signed, link: signedLink } = await signSpecPayment(prepared, protocol, now);
  await linkReservation(client, reservationId, { ...signedLink, ...link });
  return { ...authorized, signed };
}

/** A payment in the spec's formats, signed, and its reservation's link. */
interface SpecSigned {
  readonly signed: SignedPayment;
  readonly link: { readonly paymentRef: string; readonly expiresAt: Date };
}

/** The agent signs the offer's x402 payload or MPP submission (no database: also under the reservation's lock). */
async function signSpecPayment(prepared: PreparedAuthorization, protocol: Protocol, now: Date): Promise<SpecSigned> {
  const { signer } = prepared;
  const { endpoint, offer } = prepared.request;
  if (protocol === "x402") {
    const payload = await signPaymentPayload(signer, offer.x402!, { now });
    const p = payload.payload;
    return {
      signed: { protocol: "x402", payload },
      link: { paymentRef: x402PaymentRef(p.from, p.nonce), expiresAt: new Date(p.validUntilSeconds * 1000) },
    };
  }
  const mpp = offer.mpp!;
  let method: string;
  try {
    method = chooseMethod(mpp.paymentMethods);
  } catch (error) {
    throw httpError("BAD_USER_INPUT", (error as Error).message, {
      field: "mpp.paymentMethods",
      errorClass: "PaymentProtocolError",
      endpoint,
    });
  }
  const submission = await signMppSubmission(signer, mpp, { method, resource: endpoint, now });
  const a = submission.authorization;
  return {
    signed: { protocol: "mpp", method, paymentEndpoint: mpp.paymentEndpoint, submission },
    link: { paymentRef: mppPaymentRef(a.payer, a.nonce), expiresAt: new Date(a.validUntilSeconds * 1000) },
  };
}

/**
 * Before the reservation: the payee is one the ledger can credit, the offer's resource is on the
 * endpoint's host, and the agent holds the amount (a transfer signed without it would only fail
 * at the payee's simulation, after its reservation had been locked until the blockhash expired).
 */
function checkTransferOffer(prepared: PreparedAuthorization, offer: TransferOffer): void {
  const { endpoint } = prepared.request;
  checkPayee(offer.payTo, [offer.mint], `${offer.format}.payTo`);
  if (offer.resourceUrl !== null) {
    let host: string;
    try {
      host = new URL(offer.resourceUrl).hostname;
    } catch {
      throw badRequest(`${offer.format}.resource`, "must be an http(s) URL");
    }
    if (host !== new URL(endpoint).hostname)
      throw badRequest(`${offer.format}.resource`, `pays for ${offer.resourceUrl}, not for ${endpoint}`);
  }
  const balance = prepared.transferChain!.balanceUnits;
  if (balance < offer.amountUnits) {
    throw httpError("INSUFFICIENT_FUNDS", `the agent's wallet holds ${balance} base units, the payment needs ${offer.amountUnits}`, {
      errorClass: "InsufficientFundsError",
      requiredUnits: offer.amountUnits.toString(),
      balanceUnits: balance.toString(),
    });
  }
}

/**
 * The agent signs the transfer (after the policy allowed it), and its row and the reservation's
 * link commit with the reservation. The link is claimed from the start: the signed bytes may land
 * until their blockhash expires, whatever the caller does next.
 */
async function signOfferedTransfer(
  client: pg.PoolClient,
  prepared: PreparedAuthorization,
  offer: TransferOffer,
  authorized: { readonly reservationId: string; readonly parentTxHash: string | null; readonly invocation: string | null },
  now: Date,
): Promise<SignedPayment> {
  const transfers = prepared.deps.transfers!;
  const { blockhash } = prepared.transferChain!;
  const { agent, endpoint } = prepared.request;
  const payer = prepared.keypair;
  const signed = transfers.sign(offer, payer, blockhash.blockhash);
  const paymentRef = transferPaymentRef(signed.payerSignature);
  await insertTransfer(client, {
    paymentRef,
    reservationId: authorized.reservationId,
    agentId: agent.agent_id,
    protocol: offer.protocol,
    format: offer.format,
    payer: payer.publicKey.toBase58(),
    payee: offer.payTo,
    mint: offer.mint,
    amountUnits: offer.amountUnits,
    endpoint,
    parentTxHash: authorized.parentTxHash,
    invocation: authorized.invocation,
    payerSignature: signed.payerSignature,
    feePayer: signed.feePayer,
    expectedTx: signed.expectedTx,
    lastValidBlockHeight: blockhash.lastValidBlockHeight,
  });
  await linkReservation(client, authorized.reservationId, {
    paymentRef,
    // No wall-clock expiry: the ledger's block height decides when it can no longer land.
    expiresAt: null,
    parentTxHash: authorized.parentTxHash,
    claimedAt: now,
  });
  return {
    protocol: "transfer",
    paymentProtocol: offer.protocol,
    format: offer.format,
    headers: paymentHeaders(offer.wire, signed.wire),
    payTo: offer.payTo,
    feePayer: signed.feePayer,
    lastValidBlockHeight: blockhash.lastValidBlockHeight,
  };
}
