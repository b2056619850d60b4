/**
 * `paidTool`: charge for a tool of an MCP server built with the official SDK
 * (`McpServer.registerTool(name, config, paidTool(options, handler))`). The tool declares its
 * price like `x402Middleware` does, and every call goes through the same gate (x402.ts,
 * standard.ts): settled through the gateway before the handler runs, the handler at most once
 * per payment.
 *
 * The wire is each protocol's MCP binding (docs/protocols.md "MCP"): an unpaid call answers a
 * tool result with `isError` offering both x402 (`PaymentRequired`) and MPP
 * (`org.paymentauth/payment-required`), as one HTTP 402 does; the payment and the receipt travel
 * in `_meta`. Zero dependencies: the MCP shapes are written out here, not imported.
 */
import { isObject } from "./gateway.js";
import type { GateAnswer, GateRequest } from "./http.js";
import {
  base64Url,
  canonicalJson,
  decodeBase64UrlJson,
  PAYMENT_RECEIPT,
  PAYMENT_REQUIRED,
  PAYMENT_RESPONSE,
  PAYMENT_SIGNATURE,
} from "./standard.js";
import { X_PAYMENT_ERROR, X_PAYMENT_RESPONSE, type X402Options, type X402Payment, x402Gate } from "./x402.js";

export const X402_PAYMENT_META = "x402/payment";
export const X402_PAYMENT_RESPONSE_META = "x402/payment-response";
export const MPP_CREDENTIAL_META = "org.paymentauth/credential";
export const MPP_PAYMENT_REQUIRED_META = "org.paymentauth/payment-required";
export const MPP_RECEIPT_META = "org.paymentauth/receipt";

/** An MCP `CallToolResult`, as far as this helper reads and writes it. */
export interface ToolResult {
  [key: string]: unknown;
  content: Array<{ type: string; [key: string]: unknown }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
}

/** What the official SDK passes a tool callback beside its arguments (only `_meta` is read). */
export interface ToolCallExtra {
  readonly _meta?: Record<string, unknown> | undefined;
}

export interface PaidToolOptions extends X402Options {
  /**
   * The tool as a URL, `<MCP server URL>#<tool name>` (e.g. `https://api.example.com/mcp#forecast`):
   * the resource its 402 names, whose host is the MPP realm and the domain payers' policies see.
   */
  readonly resource: string;
}

/** `R`: the SDK's own `CallToolResult` when the handler is typed by it; the helper's answers are valid ones too. */
export type PaidToolHandler<A, R extends ToolResult = ToolResult> = (args: A, extra: ToolCallExtra, payment: X402Payment) => R | Promise<R>;

function base64Json(value: unknown): string {
  return Buffer.from(JSON.stringify(value), "utf8").toString("base64");
}

function decodeBase64(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(Buffer.from(text, "base64").toString("utf8"));
  } catch {
    return undefined;
  }
}

/** The payment a call's `_meta` carries, as the HTTP headers the gate reads. */
export function paymentHeaders(meta: Record<string, unknown> | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  const x402 = meta?.[X402_PAYMENT_META];
  if (isObject(x402)) headers[PAYMENT_SIGNATURE] = base64Json(x402);
  const credential = meta?.[MPP_CREDENTIAL_META];
  if (isObject(credential) && isObject(credential.challenge)) {
    // On MCP the challenge's request travels decoded; on HTTP it is base64url canonical JSON.
    const { request, ...challenge } = credential.challenge;
    const wire = {
      challenge: { ...challenge, request: typeof request === "string" ? request : base64Url(canonicalJson(request)) },
      payload: credential.payload,
      ...(credential.source === undefined ? {} : { source: credential.source }),
    };
    headers.authorization = `Payment ${base64Url(JSON.stringify(wire))}`;
  }
  return headers;
}

/** The `Payment` challenges of a `WWW-Authenticate` value our gate wrote (quoted parameters), request decoded. */
export function challengesOf(header: string | undefined): Record<string, unknown>[] {
  if (header === undefined) return [];
  return header
    .split(/,\s*(?=Payment\s)/)
    .map((part) => {
      const params: Record<string, unknown> = {};
      for (const match of part.replace(/^Payment\s+/, "").matchAll(/([a-z]+)="([^"]*)"/g)) params[match[1]!] = match[2]!;
      if (typeof params.request === "string") params.request = decodeBase64UrlJson(params.request);
      return params;
    })
    .filter((params) => typeof params.id === "string" && isObject(params.request));
}

function paymentRequiredResult(gate: GateAnswer): ToolResult {
  const paymentRequired = decodeBase64(gate.headers[PAYMENT_REQUIRED]);
  const challenges = challengesOf(gate.headers["www-authenticate"]);
  const reason = gate.headers[X_PAYMENT_ERROR];
  const message = reason === undefined ? "Payment required" : `Payment refused: ${reason}`;
  const data = isObject(paymentRequired) ? { ...paymentRequired, ...(reason === undefined ? {} : { error: reason }) } : undefined;
  return {
    isError: true,
    content: [{ type: "text", text: JSON.stringify({ "x402/error": { code: 402, message, data: data ?? null } }) }],
    ...(data === undefined ? {} : { structuredContent: data }),
    ...(challenges.length === 0 ? {} : { _meta: { [MPP_PAYMENT_REQUIRED_META]: { httpStatus: 402, challenges } } }),
  };
}

function failureResult(gate: GateAnswer): ToolResult {
  const body = isObject(gate.body) ? gate.body : {};
  const error = typeof body.error === "string" ? body.error : `status ${gate.status}`;
  return {
    isError: true,
    content: [{ type: "text", text: `payment could not be settled: ${error}` }],
    structuredContent: { error, status: gate.status },
  };
}

/** The receipts of the gate's paid answer, as the result's `_meta`. */
function receiptMeta(headers: Record<string, string>): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  const x402 = decodeBase64(headers[PAYMENT_RESPONSE] ?? headers[X_PAYMENT_RESPONSE.toLowerCase()] ?? headers[X_PAYMENT_RESPONSE]);
  if (isObject(x402)) meta[X402_PAYMENT_RESPONSE_META] = x402;
  const receipt = headers[PAYMENT_RECEIPT] === undefined ? undefined : decodeBase64UrlJson(headers[PAYMENT_RECEIPT]);
  if (isObject(receipt)) meta[MPP_RECEIPT_META] = receipt;
  return meta;
}

/**
 * The tool callback for `registerTool(name, config, callback)` (with or without an
 * `inputSchema`; without one, `handler` gets `{}` as its arguments): charges, then runs
 * `handler` with the payment. Without payment (or with one the gateway refused) it answers the
 * payment-required result and the handler does not run.
 */
export function paidTool<A = Record<string, unknown>, R extends ToolResult = ToolResult>(
  options: PaidToolOptions,
  handler: PaidToolHandler<A, R>,
): (args: A, extra?: ToolCallExtra) => Promise<R> {
  const resource = new URL(options.resource);
  const gate = x402Gate({ ...options, resource: resource.toString() });
  return async (first, second) => {
    // A tool registered without an inputSchema is called with the extra alone.
    const extra = (second ?? first) as ToolCallExtra;
    const args = (second === undefined ? {} : first) as A;
    const headers = paymentHeaders(extra?._meta);
    const request: GateRequest = {
      method: "POST",
      url: resource,
      mountPath: "",
      header: (name) => headers[name.toLowerCase()],
      json: async () => undefined,
    };
    const outcome = await gate(request);
    if (outcome.kind === "answer") return (outcome.status === 402 ? paymentRequiredResult(outcome) : failureResult(outcome)) as R;
    const receipts = receiptMeta(outcome.headers);
    let result: R;
    try {
      result = await handler(args, extra, outcome.payment);
    } catch (error) {
      // Paid and settled: the caller gets the receipt with the failure, never a reason to pay again.
      const message = error instanceof Error ? error.message : String(error);
      return { isError: true, content: [{ type: "text", text: message }], _meta: receipts } as ToolResult as R;
    }
    return { ...result, _meta: { ...result._meta, ...receipts } } as R;
  };
}
