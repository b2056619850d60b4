/**
 * Sign-in state. The API key is sent once, in the Authorization header of `POST
 * /dashboard/api/session`, and forgotten: the server answers with an HttpOnly session cookie the
 * page cannot read, and every later request is authenticated by that cookie plus the CSRF header.
 * Nothing is written to localStorage, sessionStorage, a URL or the console.
 *
 * The session is checked at start, every HEARTBEAT_MS while the page is open, when the page
 * becomes visible again, and whenever the API answers 401: a key revoked elsewhere signs the
 * dashboard out within seconds.
 */
import { useSyncExternalStore } from "react";

export const SESSION_URL = "/dashboard/api/session";
export const CSRF_HEADERS = { "x-apg-csrf": "1" } as const;
const HEARTBEAT_MS = 5_000;

export interface SessionInfo {
  readonly accountId: string;
  readonly accountName: string;
  readonly keyPrefix: string;
  /** The key's scope: `admin` or `approver` (agent keys cannot sign in). */
  readonly scope: string;
  readonly expiresAt: string;
}

export type SessionState =
  | { readonly status: "checking" }
  | { readonly status: "signed-in"; readonly session: SessionInfo; readonly apiReachable: boolean }
  | { readonly status: "signed-out"; readonly message: string | null }
  | { readonly status: "unreachable"; readonly message: string };

let state: SessionState = { status: "checking" };
const listeners = new Set<() => void>();

function set(next: SessionState): void {
  state = next;
  for (const listener of listeners) listener();
}

export function useSession(): SessionState {
  return useSyncExternalStore(
    (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    () => state,
  );
}

const UNREACHABLE = "The API cannot be reached. Is the system running (npm start)?";

async function problemDetail(response: Response): Promise<string | null> {
  try {
    const body = (await response.json()) as { detail?: unknown };
    return typeof body.detail === "string" ? body.detail : null;
  } catch {
    return null;
  }
}

/** Asks the server whether the cookie's session is live. */
export async function checkSession(): Promise<void> {
  let response: Response;
  try {
    response = await fetch(SESSION_URL, { credentials: "same-origin", headers: CSRF_HEADERS, cache: "no-store" });
  } catch {
    if (state.status === "signed-in") set({ ...state, apiReachable: false });
    else set({ status: "unreachable", message: UNREACHABLE });
    return;
  }
  if (response.ok) {
    set({ status: "signed-in", session: (await response.json()) as SessionInfo, apiReachable: true });
    return;
  }
  if (response.status === 401) {
    const wasSignedIn = state.status === "signed-in";
    set({
      status: "signed-out",
      message: wasSignedIn ? "Your session ended: it was signed out, it expired, or its API key was revoked. Sign in again." : null,
    });
    return;
  }
  if (state.status === "signed-in") set({ ...state, apiReachable: false });
  else set({ status: "unreachable", message: `The API answered ${response.status}.` });
}

/** Exchanges the key for a session cookie; the key is not kept anywhere. Answers an error message or null. */
export async function signIn(apiKey: string): Promise<string | null> {
  let response: Response;
  try {
    response = await fetch(SESSION_URL, {
      method: "POST",
      credentials: "same-origin",
      headers: { authorization: `Bearer ${apiKey.trim()}`, ...CSRF_HEADERS },
      cache: "no-store",
    });
  } catch {
    return UNREACHABLE;
  }
  if (response.status === 201) {
    set({ status: "signed-in", session: (await response.json()) as SessionInfo, apiReachable: true });
    return null;
  }
  if (response.status === 401) return "That API key is not valid: it is unknown, mistyped or revoked.";
  return (await problemDetail(response)) ?? `Sign-in failed (HTTP ${response.status}).`;
}

export async function signOut(): Promise<void> {
  try {
    await fetch(SESSION_URL, { method: "DELETE", credentials: "same-origin", headers: CSRF_HEADERS, cache: "no-store" });
  } finally {
    set({ status: "signed-out", message: "You are signed out." });
  }
}

/** Any API answer of 401 means the session is gone: re-check it (which signs out). */
export function reportUnauthenticated(): void {
  if (state.status === "signed-in") void checkSession();
}

let watching = false;

export function startSessionWatch(): void {
  void checkSession();
  if (watching) return;
  watching = true;
  window.setInterval(() => {
    if (state.status !== "signed-out") void checkSession();
  }, HEARTBEAT_MS);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && state.status !== "signed-out") void checkSession();
  });
}
