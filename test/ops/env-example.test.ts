/**
 * `.env.example` is complete: it is exactly what `npm run env:example` generates from the table of
 * variables (indexer/config/variables.ts), every variable the loaders read is in that table, every
 * variable in the table is read by a loader, and no entry point reads the environment around them.
 */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { VARIABLES } from "../../indexer/config/index.js";
import { ENV_EXAMPLE, envExample } from "../../scripts/env-example.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const read = (path: string): string => readFileSync(join(ROOT, path), "utf8");
const ENTRY_POINTS = [
  "api/gateway/main.ts",
  "api/gateway/serve.ts",
  "api/query/main.ts",
  "api/query/serve.ts",
  "indexer/cli.ts",
  "scripts/start.ts",
  "scripts/admin.ts",
];

describe(".env.example", () => {
  it("is what the table of variables generates (npm run env:example)", () => {
    expect(readFileSync(ENV_EXAMPLE, "utf8")).toBe(envExample());
  });

  it("lists every variable once, each with its comment", () => {
    const text = readFileSync(ENV_EXAMPLE, "utf8");
    for (const variable of VARIABLES) {
      const assignments = text.split("\n").filter((line) => new RegExp(`^(# )?${variable.name}=`).test(line));
      expect(assignments, variable.name).toHaveLength(1);
      expect(text).toContain(`# ${variable.describe}\n`);
    }
  });

  it("names exactly the variables the loaders read", () => {
    const loaders = read("indexer/config/services.ts");
    const readNames = new Set([...loaders.matchAll(/\b(?:required|optional|withDefault|raw)\("([A-Z0-9_]+)"/g)].map((m) => m[1]!));
    expect([...readNames].sort()).toEqual(VARIABLES.map((v) => v.name).sort());
  });

  it("is the only way the entry points read the environment", () => {
    for (const file of ENTRY_POINTS) {
      expect(read(file), file).not.toMatch(/process\.env\.[A-Z_]+|process\.env\[/);
    }
  });
});
