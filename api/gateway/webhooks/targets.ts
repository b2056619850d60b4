/**
 * Where a notification goes: `webhook:<url>` or `email:<address>` (spec 2.10 `--notify`). Slack is
 * a webhook whose URL is on hooks.slack.com; it gets Slack's `{ text }` body instead of the event.
 *
 * `refuseInternalWebhookUrl` is the registration-time half of the server-side request forgery
 * guard (the delivery-time half, on the addresses actually connected to, is api/gateway/webhooks/http.ts).
 */
import { isIP } from "node:net";
import { ServiceError } from "../../shared/errors.js";
import { classifyAddress } from "./addresses.js";

export type Channel = "webhook" | "email";

export interface NotifyTarget {
  readonly channel: Channel;
  /** The URL or the e-mail address. */
  readonly destination: string;
}

export const SLACK_HOSTS: readonly string[] = ["hooks.slack.com"];
const MAX_URL_LENGTH = 2_048;
const MAX_EMAIL_LENGTH = 254;
// Deliberately plain: one @, no spaces or angle brackets (which could inject SMTP headers).
const EMAIL = /^[^\s@<>,;"]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/;

/** A malformed notify target or webhook URL: BAD_USER_INPUT with reason `invalid_notify_target`. */
export class InvalidTargetError extends ServiceError {
  declare readonly reason: "invalid_notify_target";

  constructor(message: string) {
    super("BAD_USER_INPUT", message, { reason: "invalid_notify_target" });
    this.name = "InvalidTargetError";
  }
}

/** An absolute http(s) URL without credentials, normalized by the URL parser. */
export function parseWebhookUrl(text: string): string {
  if (typeof text !== "string" || text.length === 0 || text.length > MAX_URL_LENGTH) {
    throw new InvalidTargetError(`a webhook URL has 1..${MAX_URL_LENGTH} characters`);
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidTargetError("the webhook URL does not parse");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw new InvalidTargetError("a webhook URL is http or https");
  if (url.username !== "" || url.password !== "") throw new InvalidTargetError("a webhook URL carries no credentials");
  url.hash = "";
  return url.toString();
}

export function parseEmailAddress(text: string): string {
  if (typeof text !== "string" || text.length > MAX_EMAIL_LENGTH || !EMAIL.test(text)) {
    throw new InvalidTargetError("not an e-mail address");
  }
  return text;
}

/** `webhook:<url>` | `email:<address>`. */
export function parseNotifyTarget(text: string): NotifyTarget {
  if (typeof text !== "string") throw new InvalidTargetError("notify must be webhook:<url> or email:<address>");
  if (text.startsWith("webhook:")) return { channel: "webhook", destination: parseWebhookUrl(text.slice("webhook:".length)) };
  if (text.startsWith("email:")) return { channel: "email", destination: parseEmailAddress(text.slice("email:".length)) };
  throw new InvalidTargetError("notify must be webhook:<url> or email:<address>");
}

export function formatNotifyTarget(target: NotifyTarget): string {
  return `${target.channel}:${target.destination}`;
}

export function isSlackUrl(url: string, slackHosts: readonly string[] = SLACK_HOSTS): boolean {
  try {
    return slackHosts.includes(new URL(url).hostname.toLowerCase());
  } catch {
    return false;
  }
}

/** For logs: a Slack webhook's path is its credential, so only the origin is ever printed. */
export function redactUrl(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return "[unparseable url]";
  }
}

/** What registration accepts beyond public hosts. */
export interface WebhookTargetPolicy {
  /**
   * Local development only: accept loopback hosts (127.0.0.0/8, ::1, `localhost`). Never any other
   * private, link-local or metadata address. Off unless configured (WEBHOOK_ALLOW_LOOPBACK=true).
   */
  readonly allowLoopback?: boolean;
}

export type RefusedTargetReason = "loopback" | "non_public_address" | "internal_name";

/** A well-formed webhook URL whose host is not a public destination (INVALID_WEBHOOK_URL, field `url`). */
export class WebhookTargetRefusedError extends ServiceError {
  declare readonly reason: RefusedTargetReason;

  constructor(
    readonly host: string,
    reason: RefusedTargetReason,
  ) {
    super(
      "INVALID_WEBHOOK_URL",
      reason === "loopback"
        ? `the webhook host ${host} is a loopback address, accepted only by a local development setup (WEBHOOK_ALLOW_LOOPBACK=true)`
        : reason === "internal_name"
          ? `the webhook host ${host} is an internal or metadata name; use a public DNS name`
          : `the webhook host ${host} is not a public address (private, link-local, metadata, unspecified or reserved)`,
      { reason, field: "url", extra: { host } },
    );
    this.name = "WebhookTargetRefusedError";
  }
}

// Names that reach the provider's metadata service or the local network, never a customer's
// public receiver. Single-label names ("metadata", "intranet") resolve through the server's
// search domains, so any name without a dot is refused too.
const INTERNAL_NAMES = new Set(["metadata.google.internal", "metadata.goog", "instance-data", "metadata", "metadata.azure.com"]);
const INTERNAL_SUFFIXES = [".internal", ".local", ".localdomain", ".lan", ".home.arpa", ".arpa", ".intranet", ".corp"];

/**
 * Refuses a parsed webhook URL (from `parseWebhookUrl`) whose host is not a public destination.
 * The URL parser has already turned numeric obfuscations (`0x7f000001`, `2130706433`,
 * `0177.0.0.1`, `127.1`) into dotted IPv4 and IPv6 into its compressed hex form; the literal is
 * judged by `classifyAddress` (./addresses.ts), the same function delivery uses. Names are judged by their text only: a public-looking name that
 * resolves to an internal address is refused at delivery time, where the resolved address is known.
 */
export function refuseInternalWebhookUrl(url: string, policy: WebhookTargetPolicy = {}): void {
  const hostname = new URL(url).hostname.toLowerCase();
  const literal = hostname.replace(/^\[|\]$/g, "");
  if (isIP(literal) !== 0) {
    const kind = classifyAddress(literal);
    if (kind === "loopback") {
      if (policy.allowLoopback === true) return;
      throw new WebhookTargetRefusedError(hostname, "loopback");
    }
    if (kind !== "public") throw new WebhookTargetRefusedError(hostname, "non_public_address");
    return;
  }
  const name = hostname.replace(/\.+$/, "");
  if (name === "localhost" || name.endsWith(".localhost")) {
    if (policy.allowLoopback === true) return;
    throw new WebhookTargetRefusedError(hostname, "loopback");
  }
  if (!name.includes(".") || INTERNAL_NAMES.has(name) || INTERNAL_SUFFIXES.some((suffix) => name.endsWith(suffix))) {
    throw new WebhookTargetRefusedError(hostname, "internal_name");
  }
}
