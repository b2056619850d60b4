/**
 * The GraphQL client: urql for queries (a small document cache, hooks) and graphql-sse for the
 * live feed, since the API serves subscriptions as GraphQL over Server-Sent Events (graphql-yoga's
 * transport: POST /graphql with Accept: text/event-stream, "distinct connections" mode).
 *
 * Every request goes to this origin with the session cookie and the CSRF header; an answer of 401
 * (AUTHENTICATION_ERROR) makes the session re-check itself, which signs the dashboard out.
 * The live feed's stream is reopened by its view whenever it ends (views/live-feed.tsx); each
 * (re)connection is announced (`connected`), and the view re-reads what it may have missed.
 */
import { cacheExchange, Client, type CombinedError, fetchExchange, mapExchange, subscriptionExchange } from "@urql/core";
import { createClient as createSseClient, type ExecutionResult, type RequestParams } from "graphql-sse";
import { CSRF_HEADERS, reportUnauthenticated } from "../session";

export const GRAPHQL_URL = "/graphql";

function isUnauthenticated(error: CombinedError): boolean {
  return error.response?.status === 401 || error.graphQLErrors.some((e) => e.extensions?.code === "AUTHENTICATION_ERROR");
}

export const sse = createSseClient({
  url: GRAPHQL_URL,
  credentials: "same-origin",
  headers: CSRF_HEADERS,
  // graphql-sse retries failed connects itself; a stream that ends or breaks is reopened by its view.
  retryAttempts: 2,
  retry: (retries) => new Promise((resolve) => setTimeout(resolve, 250 * 2 ** retries)),
});

/** The HTTP status of a failed SSE connect (graphql-sse's NetworkError carries the response). */
export function failedStatus(error: unknown): number | null {
  const response = (error as { response?: unknown } | null)?.response;
  return response instanceof Response ? response.status : null;
}

/**
 * A client for one sign-in: the app makes a new one at each sign-in, so nothing cached for one
 * session (or account) is ever shown in another.
 */
export function createGraphqlClient(): Client {
  return new Client({
    url: GRAPHQL_URL,
    // POST always: one request shape for queries and the stream (urql would use GET for short queries).
    preferGetMethod: false,
    fetchOptions: () => ({ credentials: "same-origin", headers: { ...CSRF_HEADERS }, cache: "no-store" }),
    // Every view shows what the API holds now: cached answers are shown while fresh ones load.
    requestPolicy: "cache-and-network",
    exchanges: [
      mapExchange({
        onError(error) {
          if (isUnauthenticated(error)) reportUnauthenticated();
        },
      }),
      cacheExchange,
      subscriptionExchange({
        forwardSubscription: (request) => ({
          subscribe: (sink) => ({ unsubscribe: sse.subscribe(request as RequestParams, sink as never) }),
        }),
      }),
      fetchExchange,
    ],
  });
}

/** A subscription over SSE with its connection events (the live feed's resume needs `connected`). */
export function subscribeLive<Data>(
  request: RequestParams,
  handlers: {
    next: (result: ExecutionResult<Data>) => void;
    error: (error: unknown) => void;
    complete: () => void;
    connecting: (reconnecting: boolean) => void;
    connected: (reconnected: boolean) => void;
  },
): () => void {
  return sse.subscribe<Data>(
    request,
    { next: handlers.next, error: handlers.error, complete: handlers.complete },
    { connecting: handlers.connecting, connected: handlers.connected },
  );
}

/** One query through the client, outside a component (the live feed's re-reads). */
export async function queryOnce<Data, Variables extends Record<string, unknown>>(
  client: Client,
  query: string,
  variables: Variables,
): Promise<Data> {
  const result = await client.query<Data, Variables>(query, variables, { requestPolicy: "network-only" }).toPromise();
  if (result.error !== undefined) throw result.error;
  return result.data as Data;
}
