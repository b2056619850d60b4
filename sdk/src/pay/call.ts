/**
 * One `pay` call: its options checked into the request to the paid API (spec 4.7 step 1, before
 * anything is sent), who pays it, and that request sent again with whatever a protocol adds
 * (payment headers, a session token). Every protocol strategy works on one.
 */
import { randomUUID } from "node:crypto";
import { type ApiAnswer, ApiUnreachableError, type ApiRequest, callApi } from "../api-call.js";
import { PaymentError } from "../errors.js";
import type { Usdc } from "../money.js";
import { checkText, InvalidInputError } from "../text-input.js";
import { type PayerWallet, type PayScope, type PayShared, type ProtocolPreference, sessionScope } from "./scope.js";

export interface PayOptions {
  endpoint: string;
  method?: string;
  headers?: Record<string, string>;
  /** Sent as JSON (for POST/PUT/PATCH); a string is sent as it is. */
  body?: unknown;
  /**
   * Makes the payment authorization idempotent across calls (a retried `pay` reserves once, and a
   * `pay` again with the key of a held payment resumes it). Generated when absent; an
   * `ApprovalRequiredError` carries the one used.
   */
  idempotencyKey?: string;
  /**
   * How long to wait for a person's decision on a payment the policy held (docs/policy.md
   * "Approvals"), in milliseconds; then `ApprovalRequiredError`. Default the client's
   * `approvalTimeoutMs` (itself the client's `timeout`); 0 does not wait.
   */
  approvalTimeoutMs?: number;
  signal?: AbortSignal;
}

/** What `agents.invoke` adds to a payment: the invocation's hard budget and x402 first. */
export interface PayExtras {
  invocationBudget?: Usdc;
  protocolPreference?: ProtocolPreference;
}

const METHOD = /^[A-Z]{1,16}$/;

export class PayCall {
  readonly request: ApiRequest;
  readonly endpoint: string;
  readonly origin: string;
  readonly signal: AbortSignal | undefined;
  /** The caller's key, else one generated for this call: a held payment resumes only under its key. */
  readonly idempotencyKey: string;
  /** How long `pay` waits for a held payment's decision (ms). */
  readonly approvalTimeoutMs: number;
  readonly extras: PayExtras;
  readonly agentId: string;
  readonly parentTxHash: string | undefined;
  readonly shared: PayShared;
  readonly wallet: PayerWallet;
  /** Whose MPP sessions and channels this call may reuse (`sessionScope`). */
  readonly sessionScope: string;

  /** Checks the options (`InvalidInputError`, `TypeError`); sends nothing. */
  constructor(scope: PayScope, options: PayOptions, extras: PayExtras) {
    if (typeof options?.endpoint !== "string") throw new InvalidInputError("endpoint", "is required");
    checkText("endpoint", options.endpoint);
    if (options.method !== undefined) checkText("method", String(options.method));
    let url: URL;
    try {
      url = new URL(options.endpoint);
    } catch {
      throw new TypeError(`endpoint is not a URL: ${options.endpoint}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`endpoint must be http(s): ${options.endpoint}`);
    const method = (options.method ?? "GET").toUpperCase();
    if (!METHOD.test(method)) throw new TypeError(`method is not an HTTP method: ${options.method}`);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(options.headers ?? {})) {
      checkText(`headers.${name}`, name);
      checkText(`headers.${name}`, String(value));
      headers[name.toLowerCase()] = String(value);
    }
    let body: string | undefined;
    if (options.body !== undefined && options.body !== null) {
      if (method === "GET" || method === "HEAD") throw new TypeError(`a ${method} request has no body`);
      body = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
      headers["content-type"] ??= "application/json";
    }
    headers.accept ??= "application/json";
    this.request = { url: url.toString(), method, headers, ...(body === undefined ? {} : { body }) };
    this.endpoint = url.toString();
    this.origin = url.origin;
    this.signal = options.signal;
    this.idempotencyKey = options.idempotencyKey ?? randomUUID();
    this.approvalTimeoutMs = checkApprovalTimeout(
      options.approvalTimeoutMs ?? scope.shared.approvalTimeoutMs ?? scope.shared.transport.timeout,
    );
    this.extras = extras;
    this.agentId = scope.agentId;
    this.parentTxHash = scope.parentTxHash;
    this.shared = scope.shared;
    this.wallet = scope.wallet;
    this.sessionScope = sessionScope(scope);
  }

  /**
   * An invocation's payment (`agents.invoke`, under a hard budget) is negotiated afresh: the held
   * MPP sessions and channels pay the scope's other calls, never one that must count against it.
   */
  get budgeted(): boolean {
    return this.extras.invocationBudget !== undefined;
  }

  /** The request to the paid API with `extraHeaders`; `paid` retries its 5xx answers too. */
  async callApi(extraHeaders: Record<string, string>, paid: boolean): Promise<ApiAnswer> {
    const transport = this.shared.transport;
    const request = { ...this.request, headers: { ...this.request.headers, ...extraHeaders } };
    try {
      return await callApi(request, {
        fetch: this.shared.fetch,
        timeoutMs: transport.timeout,
        retry: transport.retryOptions,
        retryServerErrors: paid,
        signal: this.signal,
      });
    } catch (error) {
      if (error instanceof ApiUnreachableError) throw new PaymentError(error.message, { cause: error, code: "API_UNREACHABLE" });
      throw error;
    }
  }
}

/** A wait for a person in milliseconds: a whole number, 0 or more. */
export function checkApprovalTimeout(value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new TypeError(`approvalTimeoutMs must be a whole number of milliseconds, 0 or more: ${String(value)}`);
  }
  return value;
}
