/**
 * Standard Webhooks 1.0 symmetric signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
 * `<webhook-id>.<webhook-timestamp>.<body>`, the exact bytes sent, keyed by the bytes inside the
 * `whsec_` secret. Ids and timestamps are ours (never user input) and contain no `.`.
 */
import { createHmac } from "node:crypto";
import { signingKey } from "../../shared/secret-box.js";

export interface SignedHeaders {
  readonly "webhook-id": string;
  readonly "webhook-timestamp": string;
  readonly "webhook-signature": string;
}

export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string): string {
  if (id.includes(".")) throw new Error("a webhook id must not contain '.'");
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) throw new Error("timestamp must be whole unix seconds");
  const mac = createHmac("sha256", signingKey(secret)).update(`${id}.${timestampSeconds}.${body}`, "utf8").digest("base64");
  return `v1,${mac}`;
}

/** The three headers of one delivery attempt; the timestamp is the attempt's, the id the event's. */
export function signedHeaders(secret: string, id: string, at: Date, body: string): SignedHeaders {
  const timestamp = Math.floor(at.getTime() / 1000);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": signWebhook(secret, id, timestamp, body),
  };
}
