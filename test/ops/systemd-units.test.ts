/**
 * The systemd units of docs/deploy.md (docs/deploy/apg-*.service): `systemd-analyze verify`
 * accepts each where the tool is installed, and each runs the command of its package.json script
 * (the same node options and TypeScript loader), from the env file docs/deploy.md names, never
 * restarting after a refused configuration (exit 2).
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The package.json script each unit runs (`npm run <script>`), with its arguments. */
const UNITS = {
  "apg-gateway.service": { script: "gateway", args: "" },
  "apg-indexer.service": { script: "indexer", args: " run" },
  "apg-query.service": { script: "query", args: "" },
} as const;
const SCRIPTS = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
const SYSTEMD_ANALYZE = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].find((path) => existsSync(path));

describe("systemd units", () => {
  for (const [unit, { script, args }] of Object.entries(UNITS)) {
    it(`${unit} runs \`npm run ${script}${args}\`'s command from /etc/apg/apg.env and stays down after exit 2`, () => {
      const text = readFileSync(join(ROOT, "docs/deploy", unit), "utf8");
      // The same node options and TypeScript loader as the script (scripts/typescript/register.mjs).
      const command = SCRIPTS[script]!;
      expect(command).toMatch(/^node .*--import \.\/scripts\/typescript\/register\.mjs /);
      expect(text).toContain(`\nExecStart=/usr/bin/${command}${args}\n`);
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
