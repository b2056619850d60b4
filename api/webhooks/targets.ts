/**
 * Where a notification goes: `webhook:<url>` or `email:<address>` (spec 2.10 `--notify`). Slack is
 * a webhook whose URL is on hooks.slack.com; it gets Slack's `{ text }` body instead of the event.
 */

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

export class InvalidTargetError extends Error {
  override readonly name = "InvalidTargetError";
  readonly code = "invalid_notify_target";
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
