/**
 * Loading, empty and error states, written plainly, and `TableState`: the one way every view
 * shows a list's state (error with retry, loading before the first answer, empty, or the list).
 */
import type { CombinedError } from "@urql/core";
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

/**
 * A list's state: the error (with a retry) when the read failed, "Loading <what>…" until the first
 * answer, the empty text when it has no row, else the list itself (`children`). An error after an
 * answer keeps the answer on screen under the message.
 */
export function TableState({
  what,
  error,
  fetching,
  loaded,
  empty,
  emptyText,
  retry,
  children,
}: {
  what: string;
  error: CombinedError | Error | undefined | null;
  fetching: boolean;
  loaded: boolean;
  empty: boolean;
  emptyText: ReactNode;
  retry?: (() => void) | undefined;
  children: ReactNode;
}): ReactNode {
  // The bench's "first rows drawn" moment of every list (dashboard/src/perf.ts).
  useEffect(() => {
    if (loaded) markOnce(`apg:loaded:${what}`);
  }, [loaded, what]);
  return (
    <>
      {error !== undefined && error !== null ? <ErrorBox error={error} retry={retry} /> : null}
      {!loaded ? fetching ? <Loading what={what} /> : null : empty ? <Empty>{emptyText}</Empty> : children}
    </>
  );
}
