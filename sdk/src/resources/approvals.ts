/**
 * The `approvals` resource: payments a policy held for a person (docs/policy.md "Approvals",
 * docs/rest.md "Approvals"). Listing and deciding need an admin or approver key; an agent key reads
 * its own agent's approvals by id. `get` with `wait` long-polls the gateway (one request per wait,
 * never a busy loop); `waitForDecision` repeats it up to a deadline, which is how `pay` waits.
 */
import { ServiceError } from "../errors.js";
import type { Usdc } from "../money.js";
import { sleep } from "../retry.js";
import { checkText, InvalidInputError } from "../text-input.js";
import type { QueryValue, Transport } from "../transport.js";

export type ApprovalStatus = "pending" | "approved" | "denied" | "expired";
export const APPROVAL_STATUSES: readonly ApprovalStatus[] = ["pending", "approved", "denied", "expired"];

export interface Approval {
  id: string;
  agentId: string;
  status: ApprovalStatus;
  amount: Usdc;
  endpoint: string;
  domain: string;
  /** The approval rule that held it: `above`, `domains` or `firstPaymentToDomain`. */
  rule: string;
  /** `approval_required: …` */
  reason: string;
  requestedAt: string;
  /** The gateway's clock expires it then if nobody decided (`onTimeout: deny`). */
  expiresAt: string;
  decidedAt: string | null;
  /** The deciding API key's id, `link`, or `timeout`. */
  decidedBy: string | null;
  note: string | null;
  /** For an approval: `authorized`, or `refused` when the re-run policy refused it. */
  outcome?: string | null;
  /** With `outcome: "refused"`: the refusal of the re-run policy. */
  refusal?: { reasonCode: string; reason: string } | null;
  [more: string]: unknown;
}

export interface ApprovalListOptions {
  status?: ApprovalStatus;
  agentId?: string;
  /** 1-200 (the gateway's default 50). */
  limit?: number;
  /** The previous page's `nextCursor`. */
  cursor?: string;
}

export interface ApprovalPage {
  approvals: Approval[];
  nextCursor: string | null;
}

export interface DecideOptions {
  /** Shown with the decision (at most 500 characters). */
  note?: string;
  /** Makes the decision idempotent across calls (a retried approve decides once). */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** The gateway's longest long-poll, in seconds. */
export const MAX_WAIT_SECONDS = 60;
const NOTE_MAX = 500;
const APPROVAL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function checkApprovalId(id: unknown): string {
  if (typeof id !== "string" || !APPROVAL_ID.test(id)) {
    throw new InvalidInputError("approvalId", `${JSON.stringify(id)} is not an approval id (a UUID, as approvals.list returns it)`);
  }
  return id;
}

/**
 * The approval in a gateway answer: the object itself, or wrapped as `{ approval, outcome?,
 * refusal? }` (the gateway's GET and decisions answer so), the decision's outcome merged in.
 */
export function approvalOf(answer: unknown): Approval {
  const record = typeof answer === "object" && answer !== null ? (answer as Record<string, unknown>) : {};
  const inner = record.approval;
  const approval =
    typeof inner === "object" && inner !== null && record.id === undefined
      ? {
          ...(inner as Record<string, unknown>),
          ...(record.outcome === undefined ? {} : { outcome: record.outcome }),
          ...(record.refusal === undefined ? {} : { refusal: record.refusal }),
        }
      : record;
  if (typeof approval.id !== "string" || typeof approval.status !== "string") {
    throw new ServiceError("the gateway's answer is not an approval", { detail: answer });
  }
  return approval as Approval;
}

export class ApprovalOperations {
  constructor(private readonly transport: Transport) {}

  /** The account's approvals, newest first, one page (admin and approver keys). */
  async list(options: ApprovalListOptions = {}): Promise<ApprovalPage> {
    if (options.status !== undefined && !APPROVAL_STATUSES.includes(options.status)) {
      throw new InvalidInputError("status", `must be one of ${APPROVAL_STATUSES.join(", ")}`);
    }
    if (options.limit !== undefined && (!Number.isSafeInteger(options.limit) || options.limit < 1 || options.limit > 200)) {
      throw new InvalidInputError("limit", "must be an integer from 1 to 200");
    }
    const query: Record<string, QueryValue> = {
      status: options.status,
      agentId: options.agentId,
      limit: options.limit,
      cursor: options.cursor,
    };
    return this.transport.request<ApprovalPage>("GET", "/v1/approvals", { query });
  }

  /**
   * One approval. `wait` (seconds): the gateway answers once it is decided or after `wait`,
   * whichever is first; capped at 60 and below the client's per-request timeout.
   */
  async get(id: string, options: { wait?: number; signal?: AbortSignal } = {}): Promise<Approval> {
    const wait = options.wait === undefined ? undefined : this.#waitSeconds(options.wait);
    const query: Record<string, QueryValue> = wait === undefined || wait === 0 ? {} : { wait };
    const answer = await this.transport.request<unknown>("GET", `/v1/approvals/${checkApprovalId(id)}`, {
      query,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    return approvalOf(answer);
  }

  approve(id: string, options: DecideOptions = {}): Promise<Approval> {
    return this.#decide(id, "approve", options);
  }

  deny(id: string, options: DecideOptions = {}): Promise<Approval> {
    return this.#decide(id, "deny", options);
  }

  /**
   * Long-polls until the approval is decided or `timeoutMs` has passed (then answers it pending):
   * each request waits at the gateway, so a pending approval costs one request per wait.
   */
  async waitForDecision(id: string, options: { timeoutMs: number; signal?: AbortSignal; now?: () => number }): Promise<Approval> {
    const now = options.now ?? Date.now;
    const deadline = now() + Math.max(0, options.timeoutMs);
    for (;;) {
      const left = Math.floor((deadline - now()) / 1000);
      const approval = await this.get(id, { wait: Math.max(0, left), ...(options.signal === undefined ? {} : { signal: options.signal }) });
      if (approval.status !== "pending" || left <= 0) return approval;
      // A per-request timeout under 2 s leaves no wait to the gateway: pace the polls here instead.
      if (this.#waitSeconds(left) === 0) await sleep(Math.min(1_000, Math.max(0, deadline - now())), options.signal);
    }
  }

  #waitSeconds(wait: number): number {
    if (!Number.isFinite(wait) || wait < 0) throw new InvalidInputError("wait", "must be a number of seconds, 0 or more");
    // Leave a second of the per-request timeout for the answer itself.
    const ceiling = Math.max(0, Math.min(MAX_WAIT_SECONDS, Math.floor(this.transport.timeout / 1000) - 1));
    return Math.min(Math.floor(wait), ceiling);
  }

  async #decide(id: string, action: "approve" | "deny", options: DecideOptions): Promise<Approval> {
    const approvalId = checkApprovalId(id);
    const body: Record<string, string> = {};
    if (options.note !== undefined) {
      if (typeof options.note !== "string") throw new InvalidInputError("note", "must be a string");
      checkText("note", options.note);
      if (options.note.length > NOTE_MAX) throw new InvalidInputError("note", `is longer than ${NOTE_MAX} characters`);
      body.note = options.note;
    }
    const answer = await this.transport.request<unknown>("POST", `/v1/approvals/${approvalId}/${action}`, {
      body,
      ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    return approvalOf(answer);
  }
}
