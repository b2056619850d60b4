/**
 * Webhook endpoints (docs/events.md): `POST /v1/webhooks`, `GET /v1/webhooks`,
 * `DELETE /v1/webhooks/{endpointId}`, `POST /v1/webhooks/{endpointId}/rotate-secret`. The
 * `whsec_…` secret appears only in the first create or rotate answer: a replay under the same
 * Idempotency-Key answers the same endpoint with `secret: null`, and the idempotency record never
 * holds the secret. Creates and rotations are one Postgres transaction with their Idempotency-Key.
 * A URL must name a public host (422 INVALID_WEBHOOK_URL); loopback only where the deployment
 * allows it for local development (`allowLoopbackWebhooks`).
 */
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  listWebhookEndpoints,
  rotateWebhookSecret,
  type WebhookEndpoint,
} from "../../webhooks/endpoints.js";
import { parseWebhookUrl, refuseInternalWebhookUrl } from "../../webhooks/targets.js";
import { runDatabaseEffect, type RouteResponse } from "../../../shared/http/idempotency.js";
import { objectBody, optionalString, stringField, stringList } from "../../../shared/http/input.js";
import { httpError } from "../../../shared/http/problem.js";
import { json, NO_CONTENT } from "../../../shared/http/router.js";
import type { Route, RouteContext } from "../deps.js";

function endpointJson(endpoint: WebhookEndpoint): Record<string, unknown> {
  return {
    id: endpoint.id,
    url: endpoint.url,
    eventTypes: endpoint.eventTypes,
    description: endpoint.description,
    createdAt: endpoint.createdAt,
  };
}

function box(context: RouteContext) {
  const secretBox = context.deps.secretBox;
  if (secretBox === undefined) throw httpError("SERVICE_UNAVAILABLE", "webhooks need the secrets key (WEBHOOK_SECRETS_KEY)");
  return secretBox;
}

async function createRoute(context: RouteContext): Promise<RouteResponse> {
  const body = objectBody(context.body, ["url"], ["eventTypes", "description"]);
  const url = stringField(body.url, "url");
  const eventTypes = stringList(body.eventTypes, "eventTypes", 16);
  const description = optionalString(body.description, "description", 500);
  // Refused before the transaction, like every bad input: nothing is stored, the key stays free.
  const targets = { allowLoopback: context.deps.allowLoopbackWebhooks === true };
  refuseInternalWebhookUrl(parseWebhookUrl(url), targets);
  const secretBox = box(context);
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const input = { url, ...(eventTypes === undefined ? {} : { eventTypes }), ...(description === undefined ? {} : { description }) };
    const created = await createWebhookEndpoint(client, secretBox, context.caller.accountId, input, targets);
    const endpoint = endpointJson(created.endpoint);
    return json(201, { ...endpoint, secret: created.secret }, { replay: { ...endpoint, secret: null } });
  });
}

async function listRoute(context: RouteContext): Promise<RouteResponse> {
  const endpoints = await listWebhookEndpoints(context.deps.pool, context.caller.accountId);
  return json(200, { webhooks: endpoints.map(endpointJson) });
}

async function deleteRoute(context: RouteContext): Promise<RouteResponse> {
  const deleted = await deleteWebhookEndpoint(context.deps.pool, context.caller.accountId, context.params.endpointId!);
  if (!deleted) throw httpError("NOT_FOUND", `no webhook endpoint ${context.params.endpointId} in this account`);
  return NO_CONTENT;
}

async function rotateRoute(context: RouteContext): Promise<RouteResponse> {
  objectBody(context.body, [], []);
  const secretBox = box(context);
  return runDatabaseEffect(context.store, context.idempotency, async (client) => {
    const secret = await rotateWebhookSecret(client, secretBox, context.caller.accountId, context.params.endpointId!);
    if (secret === null) throw httpError("NOT_FOUND", `no webhook endpoint ${context.params.endpointId} in this account`);
    return json(200, { id: context.params.endpointId, secret }, { replay: { id: context.params.endpointId, secret: null } });
  });
}

export const webhookRoutes: readonly Route[] = [
  { method: "POST", path: "/v1/webhooks", scope: "admin", handler: createRoute },
  { method: "GET", path: "/v1/webhooks", scope: "account", handler: listRoute },
  { method: "DELETE", path: "/v1/webhooks/:endpointId", scope: "admin", handler: deleteRoute },
  { method: "POST", path: "/v1/webhooks/:endpointId/rotate-secret", scope: "admin", handler: rotateRoute },
];
