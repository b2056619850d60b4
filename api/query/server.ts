/**
 * The query service's HTTP server: graphql-yoga over the schema, with auth in the context, the
 * query limits, the REST read views (api/query/rest), and the live feed over SSE (yoga's default
 * for subscriptions). A composer may mount more REST surfaces before GraphQL through `plugins`:
 * the gateway mounts its /v1 routes that way (api/gateway/server.ts), so this folder never
 * imports the gateway.
 * `createApiServer` returns the yoga instance (a fetch handler) and a node http server around it;
 * the server answers the common `POST /graphql` query itself (./direct-graphql.ts) and hands
 * everything else to yoga. Live API keys are held in memory (api/shared/key-cache.ts: revocations
 * pushed by NOTIFY, any other change within 1 s) and each document is compiled once by
 * graphql-jit; bench/http/ladder.ts measures each of these against the path without it.
 */
import { createServer, type Server } from "node:http";
import { requestIdHandler } from "../shared/ops/request-id.js";
import { createSchema, createYoga, maskError, type Plugin, type YogaServerInstance } from "graphql-yoga";
import type pg from "pg";
import type { Logger } from "pino";
import { useGraphQlJit } from "@envelop/graphql-jit";
import { getOperationAST } from "graphql";
import { authenticateGraphql } from "../shared/auth.js";
import { ApiKeyCache } from "../shared/key-cache.js";
import type { BalanceReader } from "../shared/balances.js";
import { isErrorCode } from "../shared/errors.js";
import type { OpsRoutes } from "../shared/ops/index.js";
import { type ApiContext, type ApiDependencies, createContext } from "./context.js";
import { directGraphqlHandler, useDirectResult } from "./direct-graphql.js";
import { useGraphqlRequestLimits } from "./graphql-request.js";
import { useQueryLimits } from "./limits.js";
import { LiveFeed } from "./live-feed.js";
import { resolvers } from "./resolvers/index.js";
import { useQueryRoutes } from "./rest/index.js";
import { typeDefs } from "./schema.js";

export interface ApiServerOptions {
  /** The primary: credentials, policies, the live feed; and the read models without `readPool`. */
  readonly pool: pg.Pool;
  /** A pool on a streaming replica of `pool` (`DATABASE_READ_URL`) for the read models. */
  readonly readPool?: pg.Pool;
  readonly logger?: Logger;
  readonly balances?: BalanceReader;
  readonly network?: string;
  readonly now?: () => Date;
  /** Connection string of the feed's dedicated LISTEN connection; the pool's by default. */
  readonly databaseUrl?: string;
  /** false = no live feed (no LISTEN connection); the subscription then ends at once. */
  readonly liveFeed?: boolean;
  /**
   * The operator's routes (/healthz, /readyz, /metrics, draining: api/shared/ops), served before
   * everything else; the direct GraphQL path reports its requests to them as yoga's do.
   */
  readonly ops?: OpsRoutes;
  /**
   * More request handlers served before the read views and GraphQL (the gateway's /v1 routes); as
   * a function, made from the server's shared services (to authenticate through its key cache).
   * They must leave `POST /graphql` alone: the direct path answers it before yoga's hooks run.
   */
  readonly plugins?: readonly Plugin[] | ((shared: SharedServices) => readonly Plugin[]);
  /**
   * false = every request reads its API key from the primary (the benches' baseline); by default
   * live keys are held in memory, revocations pushed by NOTIFY (api/shared/key-cache.ts).
   */
  readonly keyCache?: boolean;
  /**
   * false = graphql-js executes every operation (the benches' baseline); by default each document
   * is compiled once by graphql-jit. Parsing, validation and the resolvers are the same either way.
   */
  readonly compiledExecutor?: boolean;
  /**
   * false = yoga answers every request (the benches' baseline, the equality test's reference); by
   * default the common `POST /graphql` query is answered directly (./direct-graphql.ts). Needs
   * the compiled executor.
   */
  readonly directPath?: boolean;
}

/** What the server holds for every surface it serves: its key cache (undefined with `keyCache: false`). */
export interface SharedServices {
  readonly keys: ApiKeyCache | undefined;
}

/** The `plugins` option's handlers for a server holding `shared`. */
export function pluginsOf(plugins: ApiServerOptions["plugins"], shared: SharedServices): readonly Plugin[] {
  return typeof plugins === "function" ? plugins(shared) : (plugins ?? []);
}

export interface ApiServer {
  readonly yoga: YogaServerInstance<Record<never, never>, ApiContext>;
  readonly http: Server;
  readonly feed: LiveFeed | undefined;
  readonly keys: ApiKeyCache | undefined;
  /** Starts the feed's listener, then listens on `port` (0 = any); resolves with the port. */
  listen(port: number, host?: string): Promise<number>;
  close(): Promise<void>;
}

export function createApiServer(options: ApiServerOptions): ApiServer {
  const databaseUrl =
    options.databaseUrl ?? (options.pool as unknown as { options: { connectionString?: string } }).options.connectionString;
  const feed =
    options.liveFeed === false || databaseUrl === undefined ? undefined : new LiveFeed(options.pool, databaseUrl, options.logger);
  const keys = options.keyCache === false ? undefined : new ApiKeyCache({ connectionString: databaseUrl, logger: options.logger });
  const deps: ApiDependencies = {
    pool: options.readPool ?? options.pool,
    primary: options.pool,
    balances: options.balances,
    network: options.network,
    now: options.now,
    feed,
    keys,
  };
  const schema = createSchema<ApiContext>({ typeDefs, resolvers });
  const yoga = createYoga<Record<never, never>, ApiContext>({
    schema,
    graphqlEndpoint: "/graphql",
    // The context is built per request; without a valid key (or dashboard session) there is no context at all.
    context: async ({ request }) => createContext(deps, await authenticateGraphql(deps.primary, request.headers, keys)),
    plugins: [
      ...(options.ops === undefined ? [] : [options.ops.plugin]),
      ...pluginsOf(options.plugins, { keys }),
      useQueryRoutes({ ...deps, logger: options.logger }),
      useGraphqlRequestLimits(),
      useQueryLimits(),
      // Queries only: a subscription is one long stream (nothing to gain), and under graphql-jit's
      // subscribe the live feed's agentId filter let other agents' payments through
      // (test/api/query-service.integration.test.ts, "the live feed delivers ...").
      ...(options.compiledExecutor === false
        ? []
        : [useGraphQlJit({}, { enableIf: (args) => getOperationAST(args.document, args.operationName)?.operation === "query" })]),
      // After graphql-jit: the result the direct path executed for a request it hands on.
      useDirectResult(),
    ],
    // Unexpected errors reach the client as "Unexpected error." (no internals); the log has them.
    maskedErrors: {
      maskError(error, message, isDev) {
        // Our coded errors pass as they are. Checked by code, not `instanceof`: the resolvers'
        // graphql module instance may differ from yoga's (ESM vs CJS copies of the package).
        if (isCodedError(error)) return error as Error;
        options.logger?.error({ err: (error as { originalError?: unknown }).originalError ?? error }, "unexpected error");
        return maskError(error, message, isDev);
      },
    },
    // Cross-origin callers send their key in Authorization; no origin is ever allowed to send
    // cookies (yoga's default would allow credentials for any origin): the dashboard's session
    // cookie is for its own origin only (api/shared/session-cookie.ts).
    cors: { credentials: false },
    graphiql: false,
    landingPage: false,
    logging: false,
  });
  const direct =
    options.directPath === false || options.compiledExecutor === false
      ? undefined
      : directGraphqlHandler({ yoga, deps, track: options.ops?.track });
  const http = createServer(requestIdHandler(direct ?? yoga));
  return {
    yoga,
    http,
    feed,
    keys,
    async listen(port, host = "127.0.0.1") {
      await Promise.all([feed?.start(), keys?.start()]);
      await new Promise<void>((resolve, reject) => {
        http.once("error", reject);
        http.listen(port, host, () => resolve());
      });
      const address = http.address();
      return typeof address === "object" && address !== null ? address.port : port;
    },
    async close() {
      await new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      });
      await Promise.all([feed?.stop(), keys?.stop()]);
    },
  };
}

function isCodedError(error: unknown): boolean {
  const codeOf = (value: unknown): unknown =>
    typeof value === "object" && value !== null ? (value as { extensions?: { code?: unknown } }).extensions?.code : undefined;
  const code = codeOf(error) ?? codeOf((error as { originalError?: unknown } | null)?.originalError);
  return isErrorCode(code);
}
