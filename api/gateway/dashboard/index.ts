/**
 * The dashboard as the API process serves it (spec 4.9): its built files (`static.ts`) and its
 * sign-in (`session.ts`), as a graphql-yoga plugin answering before GraphQL. The dashboard itself
 * (dashboard/) reads everything through /graphql, with the session cookie this module sets.
 */
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Plugin } from "graphql-yoga";
import type pg from "pg";
import { handleSession, SESSION_PATH } from "./session.js";
import { DashboardFiles } from "./static.js";

/** dashboard/dist of this repository. */
export const DEFAULT_DASHBOARD_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "dashboard", "dist");

export interface DashboardOptions {
  readonly pool: pg.Pool;
  /** The built dashboard; DEFAULT_DASHBOARD_DIR when absent. */
  readonly dir?: string;
}

export function useDashboard(options: DashboardOptions): Plugin {
  const files = new DashboardFiles(options.dir ?? DEFAULT_DASHBOARD_DIR);
  return {
    async onRequest({ request, url, endResponse }) {
      if (url.pathname === SESSION_PATH) return endResponse(await handleSession(options.pool, request));
      const answer = await files.serve(request, url.pathname);
      if (answer !== null) endResponse(answer);
    },
  };
}
