/**
 * `npm run env:example`: writes `.env.example` from the table of variables
 * (indexer/config/variables.ts), so the example lists exactly what the processes read.
 * `npm run env:example -- --check` exits 1 when the file differs from the table (test/ops checks it).
 */
import { readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { type Service, VARIABLES } from "../indexer/config/index.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const ENV_EXAMPLE = join(ROOT, ".env.example");

const SERVICE_NAMES: Readonly<Record<Service, string>> = {
  gateway: "gateway",
  query: "query",
  indexer: "indexer",
  admin: "admin",
  local: "npm start",
};

function readers(readBy: (typeof VARIABLES)[number]["readBy"], need: "required" | "optional"): string {
  return (Object.keys(readBy) as Service[])
    .filter((service) => readBy[service] === need)
    .map((service) => SERVICE_NAMES[service])
    .join(", ");
}

export function envExample(): string {
  const lines = [
    "# Configuration of the gateway, the query service, the indexer and `npm run admin` (docs/deploy.md).",
    "# Generated from indexer/config/variables.ts by `npm run env:example`: edit the table, not this file.",
    "# Each process reads its environment, or `--env-file PATH` under it, and refuses to start (exit 2,",
    "# one line per problem) before touching the database or the chain when something is wrong.",
    "",
  ];
  for (const variable of VARIABLES) {
    const required = readers(variable.readBy, "required");
    const optional = readers(variable.readBy, "optional");
    const who = [required === "" ? "" : `required by ${required}`, optional === "" ? "" : `optional for ${optional}`]
      .filter((part) => part !== "")
      .join("; ");
    lines.push(`# ${variable.describe}`, `# (${who})`);
    lines.push(variable.example === "" ? `# ${variable.name}=` : `${variable.name}=${variable.example}`, "");
  }
  return lines.join("\n");
}

async function main(argv: readonly string[]): Promise<number> {
  const expected = envExample();
  if (argv.includes("--check")) {
    const actual = await readFile(ENV_EXAMPLE, "utf8").catch(() => "");
    if (actual === expected) return 0;
    console.error(".env.example is out of date with indexer/config/variables.ts: run `npm run env:example`");
    return 1;
  }
  await writeFile(ENV_EXAMPLE, expected);
  console.log(`wrote ${ENV_EXAMPLE} (${VARIABLES.length} variables)`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then((code) => process.exit(code));
}
