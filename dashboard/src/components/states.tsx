/** Loading, empty and error states, written plainly. */
import type { CombinedError } from "@urql/core";
import type { ReactNode } from "react";

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

export function ErrorBox({ error, retry }: { error: CombinedError | Error | unknown; retry?: () => void }): ReactNode {
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
