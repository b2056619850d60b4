/**
 * One payment gate, two ways to mount it: Node `http` / Express-style `(req, res, next)` and
 * fetch-style `(Request) => Response`. A gate reads the request (method, absolute URL, headers,
 * body on demand) and either answers itself (402, the MPP payment endpoint, 503) or lets the
 * handler run with the payment and the headers the paid answer must carry. The handler never
 * runs unless the gate said `paid`.
 */
import type { IncomingMessage, ServerResponse } from "node:http";

export const MAX_BODY_BYTES = 16_384;

export interface GateRequest {
  readonly method: string;
  /** The request's absolute URL as the world sees it. */
  readonly url: URL;
  /** Where the middleware is mounted (Express `baseUrl`), "" at the root. */
  readonly mountPath: string;
  header(name: string): string | undefined;
  /** The body as JSON; `undefined` for an empty, oversized or non-JSON body. */
  json(): Promise<unknown>;
}

export interface GateAnswer {
  readonly kind: "answer";
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: unknown;
}

export interface GatePaid<P> {
  readonly kind: "paid";
  readonly payment: P;
  /** Set on the handler's answer. */
  readonly headers: Record<string, string>;
}

export type Gate<P> = (request: GateRequest) => Promise<GateAnswer | GatePaid<P>>;

export function answer(status: number, body: unknown, headers: Record<string, string> = {}): GateAnswer {
  const base: Record<string, string> = { "content-type": "application/json", "cache-control": "no-store" };
  return { kind: "answer", status, headers: { ...base, ...headers }, body };
}

/**
 * 503 while the gateway has not finished settling this payment: `settlement_pending` (it answered
 * 202) or `settlement_in_progress` (409, another request settles it); a retry resolves it.
 */
export function settlementBusy(error: "settlement_pending" | "settlement_in_progress", errorHeader: string): GateAnswer {
  return answer(503, { error }, { [errorHeader]: error, "retry-after": "2" });
}

const ADDRESS = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/;

/** A base58 address (32 to 44 characters). */
export function isAddress(value: string): boolean {
  return ADDRESS.test(value);
}

export function checkPayTo(payTo: unknown, where: string): void {
  if (typeof payTo !== "string" || !isAddress(payTo)) throw new TypeError(`${where}: payTo must be a base58 address`);
}

/** The public origin: the option when given (behind a proxy), else the request's own. */
export interface OriginOption {
  /** `https://api.example.com`: the origin clients use; derived from the request when absent. */
  readonly origin?: string;
}

export function checkOrigin(origin: string | undefined, where: string): void {
  if (origin === undefined) return;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    throw new TypeError(`${where}: origin must be an absolute http(s) origin`);
  }
  if (url.origin !== origin || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new TypeError(`${where}: origin must be scheme://host[:port] without a path`);
  }
}

// ---------------------------------------------------------------- Node http / Express

export interface NodeRequest extends IncomingMessage {
  /** Express: the path with its mount prefix, and the mount prefix. */
  originalUrl?: string;
  baseUrl?: string;
  /** A body already read by a body parser (Express `express.json()`). */
  body?: unknown;
  payment?: unknown;
}

export type NextFunction = (error?: unknown) => void;
export type NodeMiddleware = (req: NodeRequest, res: ServerResponse, next?: NextFunction) => void;

async function readNodeJson(req: NodeRequest): Promise<unknown> {
  if (req.body !== undefined && (req.readableEnded || req.complete)) {
    const body = req.body;
    if (typeof body === "string" || body instanceof Uint8Array)
      return parseJsonBytes(typeof body === "string" ? new TextEncoder().encode(body) : body);
    return body;
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of req) {
    const bytes = typeof chunk === "string" ? new TextEncoder().encode(chunk) : (chunk as Uint8Array);
    size += bytes.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(bytes);
  }
  return parseJsonBytes(Buffer.concat(chunks));
}

function parseJsonBytes(bytes: Uint8Array): unknown {
  if (bytes.length === 0 || bytes.length > MAX_BODY_BYTES) return undefined;
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    return undefined;
  }
}

function nodeRequest(req: NodeRequest, origin: string | undefined): GateRequest {
  const encrypted = (req.socket as { encrypted?: boolean }).encrypted === true;
  const host = typeof req.headers.host === "string" && /^[A-Za-z0-9.:[\]-]{1,255}$/.test(req.headers.host) ? req.headers.host : "localhost";
  const base = origin ?? `${encrypted ? "https" : "http"}://${host}`;
  let url: URL;
  try {
    url = new URL(req.originalUrl ?? req.url ?? "/", base);
  } catch {
    url = new URL("/", base);
  }
  return {
    method: (req.method ?? "GET").toUpperCase(),
    url,
    mountPath: req.baseUrl ?? "",
    header(name) {
      const value = req.headers[name.toLowerCase()];
      return Array.isArray(value) ? value.join(", ") : value;
    },
    json: () => readNodeJson(req),
  };
}

function send(res: ServerResponse, result: GateAnswer): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(result.status, result.headers);
  res.end(JSON.stringify(result.body));
}

/** `(req, res, next)`: answers itself, or sets `req.payment` and the answer's headers and calls `next()`. */
export function nodeMiddleware<P>(gate: Gate<P>, origin: string | undefined): NodeMiddleware {
  return (req, res, next) => {
    gate(nodeRequest(req, origin)).then(
      (result) => {
        if (result.kind === "answer") return send(res, result);
        req.payment = result.payment;
        for (const [name, value] of Object.entries(result.headers)) res.setHeader(name, value);
        if (next === undefined) throw new Error("payment middleware: no next() to run the handler with");
        next();
      },
      (error: unknown) => {
        // A gate error never runs the handler: Express gets it through next(error), plain node a 500.
        if (next !== undefined) return next(error);
        send(res, answer(500, { error: "internal_error" }));
      },
    );
  };
}

// ---------------------------------------------------------------- fetch-style

export type FetchHandler<P> = (request: Request, payment: P) => Response | Promise<Response>;

function fetchRequest(request: Request, origin: string | undefined): GateRequest {
  const own = new URL(request.url);
  const url = origin === undefined ? own : new URL(`${own.pathname}${own.search}`, origin);
  return {
    method: request.method.toUpperCase(),
    url,
    mountPath: "",
    header: (name) => request.headers.get(name) ?? undefined,
    async json() {
      const length = Number(request.headers.get("content-length") ?? "0");
      if (length > MAX_BODY_BYTES) return undefined;
      return parseJsonBytes(new Uint8Array(await request.arrayBuffer()));
    },
  };
}

/** `(Request) => Response`: the handler gets the payment as its second argument. */
export function fetchMiddleware<P>(
  gate: Gate<P>,
  origin: string | undefined,
  handler: FetchHandler<P>,
): (request: Request) => Promise<Response> {
  return async (request) => {
    const result = await gate(fetchRequest(request, origin));
    if (result.kind === "answer") return new Response(JSON.stringify(result.body), { status: result.status, headers: result.headers });
    const response = await handler(request, result.payment);
    const headers = new Headers(response.headers);
    for (const [name, value] of Object.entries(result.headers)) headers.set(name, value);
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  };
}

export function base64Json(value: unknown): string {
  return Buffer.from(JSON.stringify(value), "utf8").toString("base64");
}
