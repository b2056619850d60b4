/**
 * Alerts (spec 2.10, `cli alerts create`): `POST /v1/alerts`, `GET /v1/alerts[?agentId=]`,
 * `GET /v1/alerts/{alertId}`, `DELETE /v1/alerts/{alertId}`. A webhook alert's signing secret is
 * in the create answer only (and sealed in the idempotency record). The create is one Postgres
 * transaction with its Idempotency-Key.
 */
import { type Alert, createAlert, deleteAlert, getAlert, listAlerts, parseAlertOptions } from "../../events/alerts.js";
import { parseAgentId } from "../../../shared/validation.js";
import { parseNotifyTarget, refuseInternalWebhookUrl } from "../../webhooks/targets.js";
import { runDatabaseEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { objectBody, optionalString, requireAgent, stringField } from "../../../shared/http/input.js";
import { JsonNumber } from "../../../shared/http/json.js";
import { badRequest, httpError } from "../../../shared/http/problem.js";
import { json, NO_CONTENT } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

/** The alert's threshold is already the exact decimal (api/gateway/events/alerts.ts). */
function thresholdJson(alert: Alert): JsonNumber | null {
  return alert.threshold;
}

export function alertJson(alert: Alert): Record<string, unknown> {
  return {
    id: alert.id,
    agentId: alert.agentId,
    type: alert.type,
    threshold: thresholdJson(alert),
    window: alert.window,
    notify: alert.notify,
    createdAt: alert.createdAt,
  };
}

/** The create answer's warning for an e-mail alert on a server that cannot send e-mail. */
export const NO_MAIL_TRANSPORT = {
  code: "email_transport_not_configured",
  message: "no mail transport is configured on this server (SMTP_URL): the alert is stored, but its e-mails wait until one is",
} as const;

function box(context: RouteContext) {
  const secretBox = context.deps.secretBox;
  if (secretBox === undefined) throw httpError("SERVICE_UNAVAILABLE", "alerts need the secrets key (WEBHOOK_SECRETS_KEY)");
  return secretBox;
}

async function createRoute(context: RouteContext): Promise<RouteResponse> {
  const body = objectBody(context.body, ["agentId", "type", "notify"], ["threshold", "window"]);
  const agentId = parseAgentId("agentId", stringField(body.agentId, "agentId", 128));
  const threshold = body.threshold;
  if (threshold !== undefined && threshold !== null && !(threshold instanceof JsonNumber))
    throw badRequest("threshold", "must be a number");
  const input = parseAlertOptions({
    agent: agentId,
    type: stringField(body.type, "type", 64),
    threshold: threshold === undefined || threshold === null ? null : threshold.text,
    window: optionalString(body.window, "window", 16) ?? null,
    notify: stringField(body.notify, "notify"),
  });
  // A webhook target is a webhook registration like POST /v1/webhooks: a public host only.
  const target = parseNotifyTarget(input.notify);
  if (target.channel === "webhook")
    refuseInternalWebhookUrl(target.destination, { allowLoopback: context.deps.allowLoopbackWebhooks === true });
  await requireAgent(context, agentId);
  const secretBox = box(context);
  const warnings = target.channel === "email" && context.deps.mailConfigured !== true ? [NO_MAIL_TRANSPORT] : [];
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const created = await createAlert(client, secretBox, context.caller.accountId, input);
    // A signing secret is shown once: a replay under the same Idempotency-Key answers the alert without it.
    const alert = alertJson(created.alert);
    return json(201, { ...alert, signingSecret: created.signingSecret, warnings }, { replay: { ...alert, signingSecret: null, warnings } });
  });
}

async function listRoute(context: RouteContext): Promise<RouteResponse> {
  const agentText = context.query.get("agentId");
  const agentId = agentText === null ? undefined : parseAgentId("agentId", agentText);
  const alerts = await listAlerts(context.deps.pool, context.caller.accountId, agentId === undefined ? {} : { agentId });
  return json(200, { alerts: alerts.map(alertJson) });
}

async function getRoute(context: RouteContext): Promise<RouteResponse> {
  const alert = await getAlert(context.deps.pool, context.caller.accountId, context.params.alertId!);
  if (alert === null) throw httpError("NOT_FOUND", `no alert ${context.params.alertId} in this account`);
  return json(200, alertJson(alert));
}

async function deleteRoute(context: RouteContext): Promise<RouteResponse> {
  const deleted = await deleteAlert(context.deps.pool, context.caller.accountId, context.params.alertId!);
  if (!deleted) throw httpError("NOT_FOUND", `no alert ${context.params.alertId} in this account`);
  return NO_CONTENT;
}

export const alertRoutes: readonly Route[] = [
  { method: "POST", path: "/v1/alerts", scope: "admin", handler: createRoute },
  { method: "GET", path: "/v1/alerts", scope: "account", handler: listRoute },
  { method: "GET", path: "/v1/alerts/:alertId", scope: "account", handler: getRoute },
  { method: "DELETE", path: "/v1/alerts/:alertId", scope: "admin", handler: deleteRoute },
];
