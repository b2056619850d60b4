/**
 * E-mail notifications (`email:<address>` alert targets) through an SMTP transport (nodemailer).
 * The Message-ID derives from the event id, so a retried mail is recognizably the same message.
 */
import nodemailer from "nodemailer";
import { type EventPayload, summarize } from "./payloads.js";
import { writeJson } from "../../shared/http/json.js";

export interface EmailMessage {
  readonly to: string;
  readonly subject: string;
  readonly text: string;
  readonly messageId: string;
  readonly eventId: string;
}

export interface Mailer {
  send(message: EmailMessage): Promise<void>;
  close(): void;
}

export const DEFAULT_FROM = "Agent Payment Gateway <alerts@agent-payment-gateway.invalid>";
const SUBJECT_PREFIX = "[Agent Payment Gateway]";
const MESSAGE_ID_DOMAIN = "agent-payment-gateway.invalid";

/** `smtp://host:port` or `smtps://user:pass@host:465`, as nodemailer reads it. */
export function smtpMailer(smtpUrl: string, from: string = DEFAULT_FROM, timeoutMs = 15_000): Mailer {
  const transport = nodemailer.createTransport(smtpUrl);
  return {
    async send(message) {
      // nodemailer's own socket timeouts run to minutes; the dispatcher's lease must outlast a send.
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`SMTP send took over ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        await Promise.race([send(message), timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    close() {
      transport.close();
    },
  };

  async function send(message: EmailMessage): Promise<void> {
    await transport.sendMail({
      from,
      to: message.to,
      subject: message.subject,
      text: message.text,
      messageId: message.messageId,
      headers: { "X-Event-Id": message.eventId },
    });
  }
}

export function renderEmail(eventId: string, to: string, payload: EventPayload): EmailMessage {
  const text = [
    payload.detail,
    // A held payment's mail leads with its one-time link: the person decides from the mail.
    ...(payload.event === "approval.requested" ? ["", `Approve or deny: ${payload.decideUrl}`, `Expires: ${payload.expiresAt}`] : []),
    "",
    `Event: ${payload.event}`,
    `Agent: ${payload.agentId}`,
    `Time: ${payload.timestamp}`,
    `Event id: ${eventId}`,
    "",
    writeJson(payload, 2),
    "",
  ].join("\n");
  return { to, subject: `${SUBJECT_PREFIX} ${summarize(payload)}`, text, messageId: `<${eventId}@${MESSAGE_ID_DOMAIN}>`, eventId };
}
