/**
 * Builds the dashboard (dashboard/ → dashboard/dist, which the API process serves at /dashboard/)
 * when its build is missing or older than its sources: `npm start` and the dashboard's browser
 * tests and bench call it, so a fresh clone needs no separate step. `npm run build:dashboard`
 * always builds (and type-checks first).
 */
import { execFile } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { promisify } from "node:util";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const DASHBOARD_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "dashboard");
export const DASHBOARD_DIST = join(DASHBOARD_ROOT, "dist");

function newestMtimeMs(path: string): number {
  const info = statSync(path);
  if (!info.isDirectory()) return info.mtimeMs;
  let newest = info.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtimeMs(join(path, entry)));
  return newest;
}

/** Whether dashboard/dist is missing or older than the sources it is built from. */
export function dashboardBuildIsStale(): boolean {
  let built: number;
  try {
    built = statSync(join(DASHBOARD_DIST, "index.html")).mtimeMs;
  } catch {
    return true;
  }
  try {
    const sources = ["src", "index.html", "vite.config.ts"].map((name) => newestMtimeMs(join(DASHBOARD_ROOT, name)));
    return Math.max(...sources) > built;
  } catch {
    // A build without its sources (a deployment that ships dashboard/dist only) is what there is.
    return false;
  }
}

/** Builds the dashboard if needed; answers whether it built. */
export async function ensureDashboardBuilt(log: (line: string) => void = () => undefined): Promise<boolean> {
  if (!dashboardBuildIsStale()) return false;
  log("building the dashboard (dashboard/dist)…");
  // Its own process with NODE_ENV=production: a caller's NODE_ENV (vitest sets "test") would
  // otherwise make Vite bundle React's development build.
  const vite = join(DASHBOARD_ROOT, "..", "node_modules", "vite", "bin", "vite.js");
  await promisify(execFile)(process.execPath, [vite, "build", "--config", join(DASHBOARD_ROOT, "vite.config.ts"), "--logLevel", "warn"], {
    env: { ...process.env, NODE_ENV: "production" },
  });
  return true;
}
