/**
 * The systemd units of docs/deploy.md (docs/deploy/apg-*.service): `systemd-analyze verify`
 * accepts each where the tool is installed, and each runs the entry point docs/deploy.md names,
 * from the env file it names, never restarting after a refused configuration (exit 2).
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const UNITS = {
  "apg-gateway.service": "api/gateway/main.ts",
  "apg-indexer.service": "indexer/cli.ts run",
  "apg-query.service": "api/query/main.ts",
} as const;
/** Node options a unit passes as `npm run` does (package.json): the query service's young generation. */
const NODE_OPTIONS: Partial<Record<keyof typeof UNITS, string>> = { "apg-query.service": "--max-semi-space-size=64 " };
const SYSTEMD_ANALYZE = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].find((path) => existsSync(path));

describe("systemd units", () => {
  for (const [unit, entry] of Object.entries(UNITS)) {
    it(`${unit} runs ${entry} from /etc/apg/apg.env and stays down after exit 2`, () => {
      const text = readFileSync(join(ROOT, "docs/deploy", unit), "utf8");
      expect(text).toContain(`\nExecStart=/usr/bin/node ${NODE_OPTIONS[unit as keyof typeof UNITS] ?? ""}--import tsx ${entry}\n`);
      expect(text).toContain("\nEnvironmentFile=/etc/apg/apg.env\n");
      expect(text).toContain("\nRestartPreventExitStatus=2\n");
      expect(readFileSync(join(ROOT, "docs/deploy.md"), "utf8")).toContain("docs/deploy/apg-*.service");
    });
  }

  it.runIf(SYSTEMD_ANALYZE !== undefined)("parse with systemd-analyze verify", async () => {
    const units = Object.keys(UNITS).map((unit) => join(ROOT, "docs/deploy", unit));
    const { stderr } = await promisify(execFile)(SYSTEMD_ANALYZE!, ["verify", ...units]);
    expect(stderr).toBe("");
  });
});
