/**
 * The dashboard's routes: paths under /dashboard/ read with the History API (the API process
 * answers every /dashboard/ path with the page). Filters live in the query string, so a view can
 * be linked to ("this agent's ledger"); nothing secret is ever put in a URL.
 */
import { useSyncExternalStore } from "react";

export const BASE = "/dashboard";

export type Route =
  | { readonly view: "overview" }
  | { readonly view: "live" }
  | { readonly view: "spend" }
  | { readonly view: "protocols" }
  | { readonly view: "policies" }
  | { readonly view: "ledger" }
  | { readonly view: "runs"; readonly txHash: string | null }
  | { readonly view: "channels" }
  | { readonly view: "channel"; readonly address: string }
  | { readonly view: "agents" }
  | { readonly view: "agent"; readonly agentId: string }
  | { readonly view: "approvals" }
  | { readonly view: "not-found" };

export function parseRoute(pathname: string): Route {
  const path = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  const parts = path.split("/").filter((part) => part !== "");
  const [first, second] = parts.map((part) => decodeURIComponent(part));
  if (first === undefined || (first === "overview" && parts.length === 1)) return { view: "overview" };
  if (first === "live" && parts.length === 1) return { view: "live" };
  if (
    parts.length === 1 &&
    (first === "spend" ||
      first === "protocols" ||
      first === "policies" ||
      first === "ledger" ||
      first === "agents" ||
      first === "channels" ||
      first === "approvals")
  ) {
    return { view: first };
  }
  if (first === "runs" && parts.length <= 2) return { view: "runs", txHash: second ?? null };
  if (first === "agents" && second !== undefined && parts.length === 2) return { view: "agent", agentId: second };
  if (first === "channels" && second !== undefined && parts.length === 2) return { view: "channel", address: second };
  return { view: "not-found" };
}

const listeners = new Set<() => void>();

function notify(): void {
  for (const listener of listeners) listener();
}

window.addEventListener("popstate", notify);

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

const snapshot = (): string => window.location.pathname + window.location.search;

/** The current path and query, re-rendering on navigation. */
export function useLocation(): { readonly route: Route; readonly params: URLSearchParams; readonly href: string } {
  const href = useSyncExternalStore(subscribe, snapshot);
  const url = new URL(href, window.location.origin);
  return { route: parseRoute(url.pathname), params: url.searchParams, href };
}

/** `/dashboard/<path>?<query>` with empty values left out. */
export function href(path: string, query: Record<string, string | null | undefined> = {}): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== null && value !== undefined && value !== "") search.set(name, value);
  const text = search.toString();
  return `${BASE}/${path.replace(/^\//, "")}${text === "" ? "" : `?${text}`}`;
}

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (options.replace === true) window.history.replaceState(null, "", to);
  else window.history.pushState(null, "", to);
  notify();
}

/** Replaces some query parameters of the current location (filters), keeping the path. */
export function setParams(changes: Record<string, string | null>): void {
  const url = new URL(window.location.href);
  for (const [name, value] of Object.entries(changes)) {
    if (value === null || value === "") url.searchParams.delete(name);
    else url.searchParams.set(name, value);
  }
  navigate(url.pathname + url.search, { replace: true });
}
