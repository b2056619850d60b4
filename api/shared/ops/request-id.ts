/**
 * The request id of an HTTP request, carried through everything the request causes in process.
 * The server accepts a well-formed incoming `x-request-id` (a caller's or a proxy's, so one id
 * follows a payment across services) or makes one, echoes it in the response's header, and runs
 * the request inside an AsyncLocalStorage scope: `requestIdMixin` puts it on every pino line
 * logged in that scope (the settlement's included), and the outbox stores it with each event
 * (api/gateway/events/events.ts) so a webhook delivery, sent later by the dispatcher, logs it too.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";

export const REQUEST_ID_HEADER = "x-request-id";

/** Printable, no spaces or separators that could forge a log field; at most 128 characters. */
const WELL_FORMED = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

const scope = new AsyncLocalStorage<string>();

/** The incoming id when it is well-formed; a new random one otherwise. */
export function requestIdFrom(incoming: string | readonly string[] | undefined): string {
  return typeof incoming === "string" && WELL_FORMED.test(incoming) ? incoming : randomUUID();
}

/** The id of the request this code runs for; undefined outside a request (loops, the dispatcher). */
export function currentRequestId(): string | undefined {
  return scope.getStore();
}

/** Runs `work` as part of the request with id `requestId`. */
export function withRequestId<T>(requestId: string, work: () => T): T {
  return scope.run(requestId, work);
}

/**
 * Wraps a node HTTP handler: each request gets its id (the response header is set before the
 * handler writes anything) and runs in its scope.
 */
export function requestIdHandler(
  handler: (request: IncomingMessage, response: ServerResponse) => unknown,
): (request: IncomingMessage, response: ServerResponse) => void {
  return (request, response) => {
    const id = requestIdFrom(request.headers[REQUEST_ID_HEADER]);
    response.setHeader(REQUEST_ID_HEADER, id);
    withRequestId(id, () => handler(request, response));
  };
}

/** pino's `mixin`: adds `requestId` to each line logged inside a request. */
export function requestIdMixin(): { requestId?: string } {
  const id = scope.getStore();
  return id === undefined ? {} : { requestId: id };
}
