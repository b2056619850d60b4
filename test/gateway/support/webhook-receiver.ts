/**
 * Test doubles on loopback: an HTTP webhook receiver that records every request and answers as the
 * test scripts it (a status, or "hold": keep the request open), and an independent Standard
 * Webhooks verifier (written from the spec, not from api/gateway/webhooks/signature.ts).
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  readonly headers: IncomingMessage["headers"];
  readonly body: string;
  readonly atMs: number;
  /** What the receiver answered; null while held (or when the sender went away first). */
  answered: number | null;
}

export type Responder = (request: Received, index: number) => number | "hold";

export class WebhookReceiver {
  readonly received: Received[] = [];
  respond: Responder = () => 200;
  readonly #server: Server;
  readonly #held = new Set<ServerResponse>();
  readonly #waiters: Array<() => void> = [];
  /** The most requests this receiver held open at the same time. */
  maxHolding = 0;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(): Promise<WebhookReceiver> {
    let receiver!: WebhookReceiver;
    const server = createServer((req, res) => receiver.#handle(req, res));
    receiver = new WebhookReceiver(server);
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hooks`;
  }

  /** Resolves once `predicate` holds over what was received (checked on each arrival). */
  async until(predicate: (received: readonly Received[]) => boolean, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.received)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`receiver: condition not met within ${timeoutMs} ms (${this.received.length} requests)`);
      await new Promise<void>((done) => {
        const timer = setTimeout(done, Math.min(left, 100));
        this.#waiters.push(() => {
          clearTimeout(timer);
          done();
        });
      });
    }
  }

  /** Requests held open right now (a sender that gave up closes its request and leaves this count). */
  get holding(): number {
    return this.#held.size;
  }

  acknowledgedIds(): Set<string> {
    return new Set(this.received.filter((r) => r.answered !== null && r.answered < 300).map((r) => String(r.headers["webhook-id"])));
  }

  async close(): Promise<void> {
    for (const res of this.#held) res.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((done) => this.#server.close(() => done()));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const request: Received = { headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), atMs: Date.now(), answered: null };
      const index = this.received.push(request) - 1;
      const answer = this.respond(request, index);
      if (answer === "hold") {
        this.#held.add(res);
        this.maxHolding = Math.max(this.maxHolding, this.#held.size);
        res.on("close", () => this.#held.delete(res));
      } else {
        request.answered = answer;
        res.writeHead(answer, { "content-type": "text/plain" }).end("ok");
      }
      for (const wake of this.#waiters.splice(0)) wake();
    });
  }
}

export class SignatureError extends Error {}

/**
 * Standard Webhooks 1.0 verification: HMAC-SHA256 keyed by base64-decoded secret (after `whsec_`)
 * over `id.timestamp.body`, base64, compared in constant time to each `v1,` entry of the
 * space-separated header; timestamps more than `toleranceS` away from `nowS` are refused.
 */
export function verifyStandardWebhook(
  secret: string,
  headers: Record<string, string | string[] | undefined>,
  body: string,
  nowS: number = Math.floor(Date.now() / 1000),
  toleranceS = 300,
): void {
  const id = headers["webhook-id"];
  const timestamp = headers["webhook-timestamp"];
  const signatures = headers["webhook-signature"];
  if (typeof id !== "string" || typeof timestamp !== "string" || typeof signatures !== "string") {
    throw new SignatureError("missing headers");
  }
  const ts = Number(timestamp);
  if (!/^\d+$/.test(timestamp) || Math.abs(nowS - ts) > toleranceS) throw new SignatureError("timestamp outside tolerance");
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64");
  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest();
  for (const entry of signatures.split(" ")) {
    const [version, value] = entry.split(",", 2);
    if (version !== "v1" || value === undefined) continue;
    const given = Buffer.from(value, "base64");
    if (given.length === expected.length && timingSafeEqual(given, expected)) return;
  }
  throw new SignatureError("no matching signature");
}
