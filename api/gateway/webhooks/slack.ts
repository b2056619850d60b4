/**
 * Slack incoming webhooks take `{ "text": … }` and ignore our event JSON, so a webhook target on
 * hooks.slack.com gets a message rendered from the event (still signed; Slack ignores the headers).
 */
import { type EventPayload, summarize } from "./payloads.js";

export function slackBody(payload: EventPayload): string {
  return JSON.stringify({ text: `*${summarize(payload)}*\n${payload.detail}\n${payload.timestamp}` });
}
