import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DashboardFiles } from "./static.js";

let dir: string;
const script = `console.log(${JSON.stringify("x".repeat(2_000))});`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "apg-dashboard-static-"));
  await mkdir(join(dir, "assets"));
  await writeFile(join(dir, "index.html"), "<!doctype html><title>dashboard</title>");
  await writeFile(join(dir, "assets", "index-abc123.js"), script);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const get = (files: DashboardFiles, path: string, headers: Record<string, string> = {}, method = "GET") =>
  files.serve(new Request(`http://127.0.0.1${path}`, { method, headers }), path);

describe("the dashboard's files", () => {
  it("redirects / and /dashboard to /dashboard/, and leaves other paths to the next handler", async () => {
    const files = new DashboardFiles(dir);
    for (const path of ["/", "/dashboard"]) {
      const answer = await get(files, path);
      expect(answer?.status).toBe(302);
      expect(answer?.headers.get("location")).toBe("/dashboard/");
    }
    expect(await get(files, "/graphql")).toBeNull();
    expect(await get(files, "/v1/agents")).toBeNull();
  });

  it("answers every page path with the application, uncached, under a CSP that allows no inline script", async () => {
    const files = new DashboardFiles(dir);
    for (const path of ["/dashboard/", "/dashboard/ledger", "/dashboard/runs/abc"]) {
      const answer = (await get(files, path))!;
      expect(answer.status).toBe(200);
      expect(await answer.text()).toContain("<title>dashboard</title>");
      expect(answer.headers.get("cache-control")).toBe("no-cache");
      expect(answer.headers.get("content-security-policy")).toContain("script-src 'self'");
      expect(answer.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    }
  });

  it("serves built assets for a year, gzipped when asked", async () => {
    const files = new DashboardFiles(dir);
    const plain = (await get(files, "/dashboard/assets/index-abc123.js"))!;
    expect(plain.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(plain.headers.get("cache-control")).toContain("immutable");
    expect(await plain.text()).toBe(script);
    const gzipped = (await get(files, "/dashboard/assets/index-abc123.js", { "accept-encoding": "gzip, br" }))!;
    expect(gzipped.headers.get("content-encoding")).toBe("gzip");
    const body = Buffer.from(await gzipped.arrayBuffer());
    expect(body.length).toBeLessThan(script.length);
    expect(gunzipSync(body).toString("utf8")).toBe(script);
  });

  it("names no file outside its folder and refuses methods other than GET and HEAD", async () => {
    const files = new DashboardFiles(dir);
    for (const path of [
      "/dashboard/assets/../index.html",
      "/dashboard/assets/%2e%2e/index.html",
      "/dashboard/assets/missing.js",
      "/dashboard/assets/",
    ]) {
      expect((await get(files, path))!.status, path).toBe(404);
    }
    expect((await get(files, "/dashboard/", {}, "POST"))!.status).toBe(405);
    const head = (await get(files, "/dashboard/", {}, "HEAD"))!;
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
  });

  it("says how to build the dashboard when it is not built", async () => {
    const files = new DashboardFiles(join(dir, "no-such-build"));
    const answer = (await get(files, "/dashboard/"))!;
    expect(answer.status).toBe(503);
    expect(await answer.text()).toContain("npm run build:dashboard");
  });
});
