/**
 * The direct path for the common GraphQL request, beside yoga: `POST /graphql` with a JSON body, a
 * Bearer key, no Origin, and one query operation. It is answered from node:http without yoga's
 * fetch adapter and envelop's per-request hooks, which cost several times the whole rest of a
 * small query (bench/http): the body is read under the same size bound, parsed by the same strict
 * rules (./graphql-request.ts), the key checked by the same `authenticate` and key cache, and the
 * document executed by graphql-jit in the context yoga would build (./context.ts), under the same
 * account scoping and loaders.
 *
 * Each query text is parsed once under the token limit, as ./limits.ts parses for yoga, validated
 * once by yoga's own enveloped `validate` (graphql's rules and the ones this service's plugins add:
 * depth, cost, text in literals), and compiled once; at most `DOCUMENTS_MAX` texts of at most
 * `DOCUMENT_TEXT_MAX` characters are held. Not through yoga's enveloped `parse`: that fills yoga's
 * parse cache, and a parse error put there outside a request is then answered 400, not yoga's 200.
 *
 * Only a plain success is answered here. Everything else goes to yoga unchanged, the body it read
 * replayed: another method, path, media type or Accept, an Origin (CORS), no Authorization (the
 * dashboard's session cookie), a body refused by the strict reader, a refused key, a document
 * that does not parse or validate, a subscription, several operations, and any result carrying
 * errors or extensions. Such a result goes along with the request, and yoga, reaching the same
 * document, takes it instead of executing again (`useDirectResult`), then answers with its own
 * statuses, masking and formats. Every answer is therefore the one yoga gives, and each query runs
 * once (test/api/direct-graphql.test.ts).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { type DocumentNode, type ExecutionResult, type GraphQLError, parse } from "graphql";
import { type CompiledQuery, compileQuery, isCompiledQuery } from "graphql-jit";
import type { Plugin, YogaServerInstance } from "graphql-yoga";
import { authenticate, type Caller } from "../shared/auth.js";
import type { OpsRoutes } from "../shared/ops/index.js";
import { type ApiContext, type ApiDependencies, createContext } from "./context.js";
import { isGraphqlJsonType, MAX_GRAPHQL_BODY_BYTES, paramsOfBody } from "./graphql-request.js";
import { MAX_QUERY_TOKENS } from "./limits.js";

/** Query texts held compiled (least recently used dropped first). */
export const DOCUMENTS_MAX = 500;
/** Longer query texts are not held (nor answered here): the cache stays a few megabytes at most. */
export const DOCUMENT_TEXT_MAX = 16 * 1024;

const JSON_TYPE = "application/json; charset=utf-8";
const GRAPHQL_RESPONSE_TYPE = "application/graphql-response+json; charset=utf-8";
/**
 * The Content-Type yoga answers a successful query with, for the Accept headers clients send most;
 * any other Accept is negotiated by yoga.
 */
const RESPONSE_TYPES: ReadonlyMap<string | undefined, string> = new Map([
  [undefined, JSON_TYPE],
  ["*/*", JSON_TYPE],
  ["application/json", JSON_TYPE],
  ["application/graphql-response+json", GRAPHQL_RESPONSE_TYPE],
]);

/** A query text's verdict: its compiled operation, or null when yoga answers it. */
interface Compiled {
  readonly query: CompiledQuery;
  /** The operation's name; a request naming another one goes to yoga. */
  readonly operationName: string | undefined;
}

export interface DirectGraphqlOptions {
  readonly yoga: YogaServerInstance<Record<never, never>, ApiContext>;
  readonly deps: ApiDependencies;
  /** The operator's request metrics and in-flight count (api/shared/ops), when served. */
  readonly track?: OpsRoutes["track"] | undefined;
}

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** Where a request handed to yoga carries the result the direct path already executed. */
const EXECUTED = Symbol("direct-graphql.executed");
type CarryingRequest = IncomingMessage & { [EXECUTED]?: ExecutionResult };

/**
 * Yoga's plugin for the direct path's hand-offs: a request carrying its executed result gets it
 * from yoga's execute step instead of a second execution (the same document, validated by the
 * same rules). Listed after graphql-jit's plugin, whose executor it replaces for that request;
 * the plugins after it (masked errors) see the result as they would have.
 */
export function useDirectResult(): Plugin<{ req?: CarryingRequest }> {
  return {
    onExecute({ args, setExecuteFn }) {
      const request = (args.contextValue as { req?: CarryingRequest }).req;
      const executed = request?.[EXECUTED];
      if (request === undefined || executed === undefined) return;
      delete request[EXECUTED];
      setExecuteFn(() => executed);
    },
  };
}

/** The whole body, or a rejection when the request ends before it (the client went away). */
function readBody(request: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.once("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    request.once("error", reject);
    request.once("close", () => {
      if (!request.complete) reject(new Error("request closed before its body ended"));
    });
  });
}

/** At most `max` values by key; the least recently used one is dropped first. */
export class RecentlyUsed<V> {
  // A Map iterates in insertion order: a value read is moved to the end, the first is the oldest.
  readonly #values = new Map<string, V>();

  constructor(readonly max: number) {}

  get size(): number {
    return this.#values.size;
  }

  /** The value of `key`, made by `make` (and held) when absent. */
  get(key: string, make: (key: string) => V): V {
    if (this.#values.has(key)) {
      const value = this.#values.get(key) as V;
      this.#values.delete(key);
      this.#values.set(key, value);
      return value;
    }
    const value = make(key);
    this.#values.set(key, value);
    if (this.#values.size > this.max) this.#values.delete(this.#values.keys().next().value!);
    return value;
  }

  has(key: string): boolean {
    return this.#values.has(key);
  }
}

/** A node:http handler answering the common case itself and handing everything else to yoga. */
export function directGraphqlHandler(options: DirectGraphqlOptions): Handler {
  const { yoga, deps } = options;
  /** Each query text's compiled document, or null when yoga must answer it (held either way). */
  const documents = new RecentlyUsed<Compiled | null>(DOCUMENTS_MAX);

  const compile = (text: string): Compiled | null => {
    let document: DocumentNode;
    try {
      document = parse(text, { maxTokens: MAX_QUERY_TOKENS });
    } catch {
      return null;
    }
    const operations = document.definitions.filter((d) => d.kind === "OperationDefinition");
    const operation = operations[0];
    if (operations.length !== 1 || operation === undefined || operation.operation !== "query") return null;
    // Yoga's graphql module and rules: under a test runner the schema may belong to another copy
    // of graphql than this file's (ESM and CJS), which graphql's own `validate` refuses.
    const { validate, schema } = yoga.getEnveloped({});
    if ((validate(schema, document) as readonly GraphQLError[]).length > 0) return null;
    // As @envelop/graphql-jit compiles it for yoga (no compiler options).
    const query = compileQuery(schema, document, undefined, {});
    if (!isCompiledQuery(query)) return null;
    return { query, operationName: operation.name?.value };
  };

  const handOn = (request: IncomingMessage, response: ServerResponse, body?: Buffer): void => {
    // whatwg-node reads a body already consumed from `request.body` (its adapter for parsed bodies).
    if (body !== undefined) (request as IncomingMessage & { body?: Buffer }).body = body;
    void yoga(request, response);
  };

  const answer = async (request: IncomingMessage, response: ServerResponse, body: Buffer, type: string): Promise<boolean> => {
    let params: ReturnType<typeof paramsOfBody>;
    try {
      params = paramsOfBody(body);
    } catch {
      return false;
    }
    const text = params.query;
    if (typeof text !== "string" || text.length > DOCUMENT_TEXT_MAX) return false;
    let caller: Caller;
    try {
      caller = await authenticate(deps.primary, request.headers.authorization ?? null, deps.keys);
    } catch {
      return false;
    }
    const document = documents.get(text, compile);
    if (document === null || (params.operationName !== undefined && params.operationName !== document.operationName)) return false;
    const result = await document.query.query(undefined, createContext(deps, caller), params.variables);
    if ((result.errors !== undefined && result.errors.length > 0) || result.extensions !== undefined) {
      // Yoga answers it, from this result (`useDirectResult`).
      (request as CarryingRequest)[EXECUTED] = result as ExecutionResult;
      return false;
    }
    // Yoga serializes a compiled query's result with the compiled stringify too.
    // Encoded once: its length and the bytes written come from the same buffer.
    const json = Buffer.from(document.query.stringify(result));
    response.writeHead(200, { "content-type": type, "content-length": json.length });
    response.end(json);
    return true;
  };

  return (request, response) => {
    const headers = request.headers;
    const type = RESPONSE_TYPES.get(headers.accept);
    const length = headers["content-length"];
    if (
      request.method !== "POST" ||
      request.url !== "/graphql" ||
      type === undefined ||
      headers.origin !== undefined ||
      headers["transfer-encoding"] !== undefined ||
      headers.authorization === undefined ||
      headers.authorization.trim() === "" ||
      !isGraphqlJsonType(headers["content-type"]) ||
      length === undefined ||
      !/^\d+$/.test(length) ||
      Number(length) === 0 ||
      Number(length) > MAX_GRAPHQL_BODY_BYTES
    ) {
      handOn(request, response);
      return;
    }
    const done = options.track?.("POST", "/graphql");
    // Continued through promises made here, so the rest runs in this request's scope (its request
    // id on every log line, api/shared/ops/request-id.ts); stream events would not carry it.
    readBody(request).then(
      (body) =>
        answer(request, response, body, type).then(
          (answered) => {
            done?.(answered ? 200 : null);
            if (!answered) handOn(request, response, body);
          },
          () => {
            // An exception outside the result (not a resolver's error): yoga answers it its own way.
            done?.(null);
            if (!response.headersSent) handOn(request, response, body);
          },
        ),
      () => {
        // The client went away before its whole body arrived: nothing to answer.
        done?.(null);
        response.destroy();
      },
    );
  };
}
