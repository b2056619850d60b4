/** A minimal HTTP client of the query service for tests: GraphQL POSTs and SSE subscriptions. */

export interface GraphQLResponse<T = Record<string, any>> {
  readonly status: number;
  readonly data: T | null | undefined;
  readonly errors: { message: string; extensions?: Record<string, unknown> }[] | undefined;
}

export function createClient(baseUrl: string) {
  async function gql<T = Record<string, any>>(
    key: string | null,
    query: string,
    variables: Record<string, unknown> = {},
  ): Promise<GraphQLResponse<T>> {
    const response = await fetch(`${baseUrl}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(key === null ? {} : { authorization: `Bearer ${key}` }) },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as { data?: T | null; errors?: GraphQLResponse["errors"] };
    return { status: response.status, data: body.data, errors: body.errors };
  }

  /** Data of a query that must succeed. */
  async function ok<T = Record<string, any>>(key: string, query: string, variables: Record<string, unknown> = {}): Promise<T> {
    const result = await gql<T>(key, query, variables);
    if (result.errors !== undefined) throw new Error(`unexpected errors: ${JSON.stringify(result.errors)}`);
    return result.data as T;
  }

  /** The codes of a query's errors. */
  async function codes(key: string | null, query: string, variables: Record<string, unknown> = {}): Promise<unknown[]> {
    const result = await gql(key, query, variables);
    return (result.errors ?? []).map((e) => e.extensions?.code);
  }

  /** Opens a subscription over SSE; `events` collects each `data:` payload. */
  async function subscribe(key: string, query: string): Promise<{ events: any[]; close(): void }> {
    const controller = new AbortController();
    const response = await fetch(`${baseUrl}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", authorization: `Bearer ${key}` },
      body: JSON.stringify({ query }),
      signal: controller.signal,
    });
    const events: any[] = [];
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    void (async () => {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          buffer += decoder.decode(value, { stream: true });
          let end: number;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            for (const line of block.split("\n")) {
              if (line.startsWith("data:") && line.slice(5).trim() !== "") events.push(JSON.parse(line.slice(5)));
            }
          }
        }
      } catch {
        // aborted
      }
    })();
    return { events, close: () => controller.abort() };
  }

  return { gql, ok, codes, subscribe };
}
