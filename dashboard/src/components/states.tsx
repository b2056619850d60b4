/**
 * Loading, empty and error states, written plainly, and `TableState`: the one way every view
 * shows a list's or record's state (error with retry, loading before the first answer, empty, or
 * the content), above a table or as a row inside one.
 */
import type { CombinedError, OperationContext } from "@urql/core";
import { type ReactNode, useEffect } from "react";
import { markOnce } from "../perf";

export function Loading({ what }: { what: string }): ReactNode {
  return (
    <p className="state" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }): ReactNode {
  return (
    <p className="state empty" data-testid="empty">
      {children}
    </p>
  );
}

/** What went wrong, for a person: the API unreachable, the session gone, or the API's own message. */
export function errorMessage(error: CombinedError | Error | unknown): string {
  const combined = error as Partial<CombinedError>;
  if (combined.response?.status === 401 || combined.graphQLErrors?.some((e) => e.extensions?.code === "AUTHENTICATION_ERROR")) {
    return "Your session is no longer valid (signed out, expired, or its API key was revoked).";
  }
  if (combined.networkError !== undefined) return "The API cannot be reached. Is the system running (npm start)?";
  const first = combined.graphQLErrors?.[0];
  if (first !== undefined) return first.message;
  return error instanceof Error ? error.message : String(error);
}

export function ErrorBox({ error, retry }: { error: CombinedError | Error | unknown; retry?: (() => void) | undefined }): ReactNode {
  return (
    <div className="error" role="alert">
      <p>{errorMessage(error)}</p>
      {retry ? (
        <button type="button" onClick={retry}>
          Try again
        </button>
      ) : null}
    </div>
  );
}

/** urql's re-execute; a retry asks the network, never the cache that holds the failure. */
type Refetch = (context?: Partial<OperationContext>) => void;

/**
 * A list's or a record's state: the error (with a retry when `refetch` is given) when the read
 * failed, "Loading <what>…" until the first answer, `emptyText` when `empty`, else `children`. An
 * error after an answer keeps the answer on screen under the message. With `colSpan` the state
 * sits in one full-width row of a `<tbody>` and `children` are that body's rows.
 */
export function TableState({
  what,
  error,
  fetching,
  loaded,
  empty = false,
  emptyText,
  refetch,
  colSpan,
  children,
}: {
  what: string;
  /** Anything `errorMessage` reads; undefined or null when the read did not fail. */
  error: unknown;
  fetching: boolean;
  loaded: boolean;
  empty?: boolean;
  emptyText?: ReactNode;
  refetch?: Refetch | undefined;
  colSpan?: number;
  children?: ReactNode;
}): ReactNode {
  // The bench's "first rows drawn" moment of every list (dashboard/src/perf.ts).
  useEffect(() => {
    if (loaded) markOnce(`apg:loaded:${what}`);
  }, [loaded, what]);
  const failed = error !== undefined && error !== null;
  const errorBox = failed ? (
    <ErrorBox error={error} retry={refetch ? () => refetch({ requestPolicy: "network-only" }) : undefined} />
  ) : null;
  const state = !loaded ? fetching ? <Loading what={what} /> : null : empty ? <Empty>{emptyText}</Empty> : null;
  const content = loaded && !empty ? children : null;
  if (colSpan === undefined) {
    return (
      <>
        {errorBox}
        {state}
        {content}
      </>
    );
  }
  return (
    <>
      {failed || !loaded || empty ? (
        <tr>
          <td colSpan={colSpan}>
            {errorBox}
            {state}
          </td>
        </tr>
      ) : null}
      {content}
    </>
  );
}
