/**
 * The dashboard's production build (dashboard/dist, made by `npm run build:dashboard`) as HTTP:
 *
 * - `/` and `/dashboard` redirect to `/dashboard/`;
 * - `/dashboard/assets/<name>` is a built file (content-hashed names: cached for a year);
 * - any other GET under `/dashboard/` is the application's page (its router reads the path), never
 *   cached, with a Content-Security-Policy that allows only this origin's scripts and requests.
 *
 * Files are read from disk on first use and kept with their gzip form until their mtime changes,
 * so a rebuild is served without a restart. A path names a file only through `[A-Za-z0-9._-]`
 * segments (no traversal). Without a build, the page says how to make one (503).
 */
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

export const DASHBOARD_PREFIX = "/dashboard/";

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
};

/** What the page may load: this origin only; no inline script, no framing. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

const SAFE_SEGMENT = /^[A-Za-z0-9._-]+$/;
const MAX_CACHED_FILES = 256;

interface CachedFile {
  readonly mtimeMs: number;
  readonly raw: Uint8Array;
  readonly gzip: Uint8Array;
}

export class DashboardFiles {
  readonly #dir: string;
  readonly #cache = new Map<string, CachedFile>();

  constructor(dir: string) {
    this.#dir = dir;
  }

  /** The answer to a GET/HEAD request for `pathname`, or null when the path is not the dashboard's. */
  async serve(request: Request, pathname: string): Promise<Response | null> {
    if (pathname === "/" || pathname === "/dashboard") return redirect(DASHBOARD_PREFIX);
    if (!pathname.startsWith(DASHBOARD_PREFIX)) return null;
    if (request.method !== "GET" && request.method !== "HEAD") {
      return new Response("method not allowed", { status: 405, headers: { allow: "GET, HEAD", ...SECURITY_HEADERS } });
    }
    const rest = pathname.slice(DASHBOARD_PREFIX.length);
    if (rest.startsWith("assets/")) {
      const segments = rest.split("/");
      if (!segments.every((segment) => SAFE_SEGMENT.test(segment) && segment !== "." && segment !== "..")) return notFound();
      const file = await this.#read(segments.join("/"));
      if (file === null) return notFound();
      return this.#answer(request, segments.at(-1)!, file, { "cache-control": "public, max-age=31536000, immutable" });
    }
    const page = await this.#read("index.html");
    if (page === null) {
      return new Response(
        "<!doctype html><title>Dashboard not built</title><p>The dashboard is not built: run <code>npm run build:dashboard</code> (npm start builds it when missing).</p>",
        { status: 503, headers: { "content-type": CONTENT_TYPES[".html"]!, "cache-control": "no-store", ...SECURITY_HEADERS } },
      );
    }
    return this.#answer(request, "index.html", page, { "cache-control": "no-cache", "content-security-policy": CONTENT_SECURITY_POLICY });
  }

  async #read(relative: string): Promise<CachedFile | null> {
    const path = join(this.#dir, relative);
    let mtimeMs: number;
    try {
      const info = await stat(path);
      if (!info.isFile()) return null;
      mtimeMs = info.mtimeMs;
    } catch {
      return null;
    }
    const cached = this.#cache.get(relative);
    if (cached !== undefined && cached.mtimeMs === mtimeMs) return cached;
    const raw = new Uint8Array(await readFile(path));
    const file = { mtimeMs, raw, gzip: new Uint8Array(gzipSync(raw, { level: 9 })) };
    if (this.#cache.size >= MAX_CACHED_FILES) this.#cache.clear();
    this.#cache.set(relative, file);
    return file;
  }

  #answer(request: Request, name: string, file: CachedFile, headers: Record<string, string>): Response {
    const extension = name.includes(".") ? name.slice(name.lastIndexOf(".")) : "";
    const gzip = /\bgzip\b/.test(request.headers.get("accept-encoding") ?? "") && file.gzip.length < file.raw.length;
    const body = gzip ? file.gzip : file.raw;
    return new Response(request.method === "HEAD" ? null : Buffer.from(body), {
      status: 200,
      headers: {
        "content-type": CONTENT_TYPES[extension] ?? "application/octet-stream",
        "content-length": String(body.length),
        vary: "accept-encoding",
        ...(gzip ? { "content-encoding": "gzip" } : {}),
        ...SECURITY_HEADERS,
        ...headers,
      },
    });
  }
}

function redirect(location: string): Response {
  return new Response(null, { status: 302, headers: { location, ...SECURITY_HEADERS } });
}

function notFound(): Response {
  return new Response("not found", { status: 404, headers: { "content-type": CONTENT_TYPES[".txt"]!, ...SECURITY_HEADERS } });
}
