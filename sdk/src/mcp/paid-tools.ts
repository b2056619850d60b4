/**
 * Paying an MCP tool that asks for payment: the client side of `paidTool` (../server/mcp.ts) and
 * of any server speaking MPP's or x402's MCP binding. The tool is called with the official SDK's
 * `Client`; a payment-required answer becomes an offer for the gateway's `authorize` (endpoint
 * `<server URL>#<tool>`, so policies and records name the server and the tool); the transfer the
 * gateway signed goes back in `_meta`, and the receipt's transaction is handed to `complete`,
 * which records the payment. A paid call the server refused releases the reservation. A payment
 * the policy held for a person (202) is not waited for (an MCP host cannot block for minutes): it
 * is `ApprovalRequiredError` with the approval's id, expiry and the Idempotency-Key to resume with.
 */
import { randomUUID } from "node:crypto";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { parseAuthorization, type TransferAuthorization } from "../authorization.js";
import { approvalRequiredFrom, PaymentError, PaymentProtocolError, ServiceError } from "../errors.js";
import { usdcToUnits } from "../money.js";
import type { MppChallengeParams, PaymentOffer } from "../payment-required.js";
import { canonicalJson } from "../server/standard.js";
import type { FetchFunction, Transport } from "../transport.js";
import { SERVER_NAME, SERVER_VERSION } from "./version.js";

const PAYMENT_REQUIRED_CODE = -32042;
const X402_PAYMENT = "x402/payment";
const X402_PAYMENT_RESPONSE = "x402/payment-response";
const MPP_CREDENTIAL = "org.paymentauth/credential";
const MPP_PAYMENT_REQUIRED = "org.paymentauth/payment-required";
const MPP_RECEIPT = "org.paymentauth/receipt";

export interface PaidToolCall {
  /** The MCP server's Streamable HTTP URL. */
  readonly server: string;
  readonly tool: string;
  readonly arguments?: Record<string, unknown>;
  /** The authorization's Idempotency-Key (generated when absent): the key of a held payment resumes it. */
  readonly idempotencyKey?: string;
}

export interface PaidToolAnswer {
  /** The tool's result as the server answered it (content, structuredContent, isError). */
  readonly result: { content: unknown[]; structuredContent?: Record<string, unknown> | null; isError: boolean };
  /** Absent when the tool did not ask for payment. */
  readonly payment?: {
    readonly protocol: "x402" | "mpp";
    readonly endpoint: string;
    readonly amount: string;
    readonly amountUnits: string;
    /** payment_ledger's record of the transfer (the transfer itself while not recorded yet). */
    readonly txHash: string;
    /** The transfer the server's side broadcast. */
    readonly settlementTxHash: string;
    readonly solanaExplorer?: string;
  };
}

type ToolResult = { content?: unknown[]; structuredContent?: Record<string, unknown>; isError?: boolean; _meta?: Record<string, unknown> };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The offer of a payment-required answer, or undefined when it is none. */
export function paymentRequiredOffer(result: ToolResult | undefined, error?: unknown): PaymentOffer | undefined {
  const offer: PaymentOffer = {};
  let challenges: unknown;
  if (error instanceof McpError && error.code === PAYMENT_REQUIRED_CODE && isRecord(error.data)) challenges = error.data.challenges;
  if (result !== undefined && result.isError === true) {
    const structured = result.structuredContent;
    const wrapped = isRecord(structured?.["x402/error"]) ? (structured["x402/error"] as Record<string, unknown>).data : undefined;
    const required =
      isRecord(structured) && structured.x402Version === 2 ? structured : isRecord(wrapped) ? wrapped : textPaymentRequired(result);
    if (isRecord(required) && required.x402Version === 2 && Array.isArray(required.accepts)) offer.x402v2 = required;
    const meta = result._meta?.[MPP_PAYMENT_REQUIRED];
    if (isRecord(meta)) challenges = meta.challenges;
  }
  if (Array.isArray(challenges)) {
    const params = challenges
      .filter(isRecord)
      .map(challengeParams)
      .filter((item) => item !== undefined);
    if (params.length > 0) offer.mppChallenges = params;
  }
  return Object.keys(offer).length === 0 ? undefined : offer;
}

function textPaymentRequired(result: ToolResult): unknown {
  const first = result.content?.[0];
  if (!isRecord(first) || typeof first.text !== "string") return undefined;
  try {
    const parsed: unknown = JSON.parse(first.text);
    if (!isRecord(parsed)) return undefined;
    return isRecord(parsed["x402/error"]) ? (parsed["x402/error"] as Record<string, unknown>).data : parsed;
  } catch {
    return undefined;
  }
}

/** An MCP challenge (request decoded) as the `WWW-Authenticate` parameters the gateway reads. */
function challengeParams(challenge: Record<string, unknown>): MppChallengeParams | undefined {
  const { id, realm, method, intent, request } = challenge;
  if (typeof id !== "string" || typeof realm !== "string" || typeof method !== "string" || typeof intent !== "string") return undefined;
  if (!isRecord(request) && typeof request !== "string") return undefined;
  const encoded = typeof request === "string" ? request : Buffer.from(canonicalJson(request), "utf8").toString("base64url");
  const optional = (key: "expires" | "description" | "digest" | "opaque") =>
    typeof challenge[key] === "string" ? { [key]: challenge[key] as string } : {};
  return {
    id,
    realm,
    method,
    intent,
    request: encoded,
    ...optional("expires"),
    ...optional("description"),
    ...optional("digest"),
    ...optional("opaque"),
  };
}

/** The signed transfer of the gateway's authorization, as the `_meta` of the paid call. */
export function paymentMeta(authorization: TransferAuthorization): Record<string, unknown> {
  const header = (name: string): string | undefined =>
    Object.entries(authorization.headers).find(([key]) => key.toLowerCase() === name)?.[1];
  if (authorization.format === "x402-v2") {
    const signature = header("payment-signature");
    if (signature !== undefined) return { [X402_PAYMENT]: JSON.parse(Buffer.from(signature, "base64").toString("utf8")) };
  }
  if (authorization.format === "mpp") {
    const credential = /^Payment\s+([A-Za-z0-9_-]+)$/.exec(header("authorization") ?? "")?.[1];
    if (credential !== undefined) {
      const wire = JSON.parse(Buffer.from(credential, "base64url").toString("utf8")) as Record<string, unknown>;
      const challenge = wire.challenge as Record<string, unknown>;
      const request: unknown = JSON.parse(Buffer.from(String(challenge.request), "base64url").toString("utf8"));
      return { [MPP_CREDENTIAL]: { ...wire, challenge: { ...challenge, request } } };
    }
  }
  throw new PaymentProtocolError(`an MCP tool cannot be paid in the ${authorization.format} format`, "");
}

/** The transaction a paid result's receipt names, or undefined when it has none that succeeded. */
export function receiptTransaction(result: ToolResult): string | undefined {
  const x402 = result._meta?.[X402_PAYMENT_RESPONSE];
  if (isRecord(x402) && x402.success === true && typeof x402.transaction === "string" && x402.transaction.length > 0)
    return x402.transaction;
  const mpp = result._meta?.[MPP_RECEIPT];
  if (isRecord(mpp) && mpp.status === "success" && typeof mpp.reference === "string") return mpp.reference;
  return undefined;
}

export class PaidToolCaller {
  readonly #transport: Transport;
  readonly #agentId: string;
  readonly #fetch: FetchFunction | undefined;

  /** `transport`: the agent's gateway transport; `fetch`: how the MCP server is reached (default the global one). */
  constructor(transport: Transport, agentId: string, fetch?: FetchFunction) {
    this.#transport = transport;
    this.#agentId = agentId;
    this.#fetch = fetch;
  }

  async call(call: PaidToolCall): Promise<PaidToolAnswer> {
    const server = new URL(call.server);
    if (server.protocol !== "http:" && server.protocol !== "https:") throw new TypeError(`server must be http(s): ${call.server}`);
    const endpoint = `${server.origin}${server.pathname}#${call.tool}`;
    const client = new McpClient({ name: SERVER_NAME, version: SERVER_VERSION });
    try {
      await client.connect(new StreamableHTTPClientTransport(server, this.#fetch === undefined ? {} : { fetch: this.#fetch }));
    } catch (error) {
      if (error instanceof ServiceError) throw error;
      throw new PaymentError(`the MCP server ${server.origin}${server.pathname} could not be reached: ${messageOf(error)}`, {
        cause: error,
      });
    }
    try {
      const params = { name: call.tool, arguments: call.arguments ?? {} };
      let first: ToolResult | undefined;
      let failure: unknown;
      try {
        first = (await client.callTool(params)) as ToolResult;
      } catch (error) {
        failure = error;
      }
      const offer = paymentRequiredOffer(first, failure);
      if (offer === undefined) {
        if (first !== undefined) return { result: resultOf(first) };
        // A JSON-RPC error that asks for no payment (an unknown tool, bad arguments): the server's answer, as a refusal.
        throw failure instanceof McpError
          ? new ServiceError(`${endpoint} answered ${failure.code}: ${failure.message}`, { detail: failure.data })
          : new PaymentError(`the call of ${endpoint} failed: ${messageOf(failure)}`, { cause: failure });
      }
      const authorization = await this.#authorize(endpoint, offer, call.idempotencyKey ?? randomUUID());
      let paid: ToolResult;
      try {
        paid = (await client.callTool({ ...params, _meta: paymentMeta(authorization) })) as ToolResult;
      } catch (error) {
        throw await this.#failed(authorization, `the paid call of ${endpoint} failed: ${messageOf(error)}`);
      }
      const settlement = receiptTransaction(paid);
      if (settlement === undefined) throw await this.#failed(authorization, `${endpoint} did not accept the payment`);
      const recorded = await this.#complete(authorization.reservationId, settlement);
      const units = usdcToUnits(authorization.amount.usdc);
      return {
        result: resultOf(paid),
        payment: {
          protocol: authorization.protocol,
          endpoint,
          amount: `${units / 1_000_000n}.${(units % 1_000_000n).toString().padStart(6, "0")}`,
          amountUnits: units.toString(),
          txHash: recorded?.txHash ?? settlement,
          settlementTxHash: settlement,
          ...(recorded?.solanaExplorer === undefined ? {} : { solanaExplorer: recorded.solanaExplorer }),
        },
      };
    } finally {
      await client.close().catch(() => undefined);
    }
  }

  async #authorize(endpoint: string, offer: PaymentOffer, idempotencyKey: string): Promise<TransferAuthorization> {
    const answer = await this.#transport.request<Record<string, unknown>>(
      "POST",
      `/v1/agents/${encodeURIComponent(this.#agentId)}/payments/authorize`,
      { body: { endpoint, ...offer }, idempotencyKey },
    );
    const held = approvalRequiredFrom(answer, 202, undefined, idempotencyKey);
    if (held !== null) throw held;
    const authorization = parseAuthorization(answer, endpoint);
    if (!("format" in authorization)) {
      throw new PaymentProtocolError(
        `the gateway chose the ${authorization.protocol} spec format, which an MCP tool cannot take`,
        endpoint,
      );
    }
    return authorization;
  }

  async #complete(reservationId: string, txHash: string): Promise<{ txHash: string; solanaExplorer?: string } | undefined> {
    try {
      const answer = await this.#transport.request<Record<string, unknown>>(
        "POST",
        `/v1/agents/${encodeURIComponent(this.#agentId)}/payments/${encodeURIComponent(reservationId)}/complete`,
        { body: { txHash } },
      );
      if (typeof answer?.txHash !== "string") return undefined;
      return { txHash: answer.txHash, ...(typeof answer.solanaExplorer === "string" ? { solanaExplorer: answer.solanaExplorer } : {}) };
    } catch {
      // The transfer landed; the gateway's sweeper records it if this hand-over was lost.
      return undefined;
    }
  }

  async #failed(authorization: TransferAuthorization, message: string): Promise<PaymentError> {
    try {
      await this.#transport.request(
        "POST",
        `/v1/agents/${encodeURIComponent(this.#agentId)}/payments/${encodeURIComponent(authorization.reservationId)}/release`,
        { body: {} },
      );
    } catch {
      // Signed and possibly landing: the gateway closes the reservation once the transfer expired.
      return new PaymentError(`${message}; the signed transfer may still land`, { code: "PAYMENT_OUTCOME_UNKNOWN" });
    }
    return new PaymentError(message);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function resultOf(result: ToolResult): PaidToolAnswer["result"] {
  return { content: result.content ?? [], structuredContent: result.structuredContent ?? null, isError: result.isError === true };
}
