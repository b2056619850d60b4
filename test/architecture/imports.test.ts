/**
 * The import rules of the architecture (api/README.md, and the floors of api/gateway/README.md),
 * checked on the source itself: every .ts(x) file of the repository is read, its relative imports
 * (static `from "..."`, side-effect imports and dynamic `import("...")`, type-only ones included)
 * are resolved to repository paths, and the edges that cross a forbidden boundary are listed. npm
 * packages and node built-ins are not edges.
 *
 * A failure prints each offending edge as `importer -> imported  [rule]`.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** Build output, dependencies and tool state, not source. */
const SKIPPED_DIRECTORIES = new Set(["node_modules", "target", "dist"]);

interface Edge {
  /** Repository-relative, `/`-separated. */
  readonly from: string;
  /** The imported module as a repository-relative path (as written: `.js` for a `.ts` file). */
  readonly to: string;
}

interface Rule {
  readonly name: string;
  readonly applies: (from: string) => boolean;
  readonly forbids: (to: string) => boolean;
}

const under =
  (...folders: string[]) =>
  (path: string): boolean =>
    folders.some((folder) => path.startsWith(`${folder}/`));

const isTestFile = (path: string): boolean => path.endsWith(".test.ts");
/** What ships: the services, the indexer, the SDK and the program's TypeScript binding; not the tests beside them. */
const isProduction = (path: string): boolean =>
  !isTestFile(path) && (under("api", "indexer", "sdk")(path) || /^programs\/(?:.+\/)?ts\//.test(path));

/**
 * The SDK's floors (sdk/README.md): `cli/` and `mcp/` on top; below them two halves that never
 * import each other, the client (`client.ts`, `pay/`, `resources/`, the transport) and the server
 * middleware (`server/`); at the bottom the modules both halves speak, which import neither.
 */
const SDK_SHARED = ["errors", "money", "receipts", "payment-required", "text-input", "rate-limits", "explorer-links", "is-main"];
const withoutExtension = (path: string): string => path.replace(/\.(?:ts|js)$/, "");
const isSdkShared = (path: string): boolean => SDK_SHARED.some((module) => withoutExtension(path) === `sdk/src/${module}`);
const isSdkServer = under("sdk/src/server");
const isSdkTop = under("sdk/src/cli", "sdk/src/mcp");
const isSdkClient = (path: string): boolean => under("sdk/src")(path) && !isSdkServer(path) && !isSdkTop(path) && !isSdkShared(path);

const RULES: readonly Rule[] = [
  { name: "api/query never imports api/gateway", applies: under("api/query"), forbids: under("api/gateway") },
  {
    name: "api/shared imports neither api/query nor api/gateway",
    applies: under("api/shared"),
    forbids: under("api/query", "api/gateway"),
  },
  { name: "sdk/ imports nothing outside sdk/", applies: under("sdk"), forbids: (to) => !under("sdk")(to) },
  { name: "sdk resources never import sdk cli", applies: under("sdk/src/resources"), forbids: under("sdk/src/cli") },
  // The resources take the pay flow's types; the flow is handed what it needs of them (PayScope).
  { name: "sdk pay never imports sdk resources", applies: under("sdk/src/pay"), forbids: under("sdk/src/resources") },
  // The client half here includes the cli and mcp on top of it: the middleware needs none of them.
  {
    name: "sdk server half never imports the client half",
    applies: isSdkServer,
    forbids: (to) => under("sdk/src")(to) && !isSdkServer(to) && !isSdkShared(to),
  },
  { name: "sdk client half never imports the server half", applies: isSdkClient, forbids: isSdkServer },
  {
    name: "sdk cli and mcp import the client, never the reverse",
    applies: (from) => under("sdk")(from) && !isSdkTop(from),
    forbids: isSdkTop,
  },
  {
    name: "sdk shared modules import neither half",
    applies: isSdkShared,
    forbids: (to) => under("sdk/src")(to) && !isSdkShared(to),
  },
  // The dashboard reads the system through the public GraphQL API only (docs/dashboard.md).
  { name: "dashboard/ imports nothing outside dashboard/", applies: under("dashboard"), forbids: (to) => !under("dashboard")(to) },
  { name: "indexer/ imports nothing from api/ or scripts/", applies: under("indexer"), forbids: under("api", "scripts") },
  { name: "production code imports neither scripts/ nor test/", applies: isProduction, forbids: under("scripts", "test") },
];

/**
 * The floors inside api/gateway (api/gateway/README.md "Floors"): a file imports its own folder and
 * folders on lower floors only, so folders on one floor (the protocols, say) never import each
 * other. The files at api/gateway/'s top (gateway.ts, main.ts, ...) form one folder on the top floor.
 */
const GATEWAY = "api/gateway";
const GATEWAY_FLOORS: Readonly<Record<string, number>> = {
  chain: 1,
  reservations: 1,
  card: 1,
  webhooks: 1,
  wire: 2,
  wallets: 2,
  settlement: 2,
  events: 2,
  payments: 3,
  invocations: 3,
  cosigned: 3,
  x402: 4,
  mpp: 4,
  channels: 4,
  transfers: 4,
  pay: 5,
  loops: 5,
  http: 6,
  mcp: 6,
  dashboard: 6,
};
const GATEWAY_TOP_FLOOR = 7;

/** The gateway folder of a path (`""` for a top-level file), or null outside api/gateway. */
function gatewayFolder(path: string): string | null {
  if (!path.startsWith(`${GATEWAY}/`)) return null;
  const parts = path.slice(GATEWAY.length + 1).split("/");
  return parts.length === 1 ? "" : parts[0]!;
}

const floorOf = (folder: string): number | undefined => (folder === "" ? GATEWAY_TOP_FLOOR : GATEWAY_FLOORS[folder]);
const folderName = (folder: string): string => (folder === "" ? `${GATEWAY}/ (top level)` : `${GATEWAY}/${folder}`);

/** The floor rule an edge inside api/gateway breaks, or null. */
function gatewayFloorViolation(edge: Edge): string | null {
  const from = gatewayFolder(edge.from);
  const to = gatewayFolder(edge.to);
  if (from === null || to === null || from === to) return null;
  for (const folder of [from, to]) {
    if (floorOf(folder) === undefined) return `${folderName(folder)} has no floor in GATEWAY_FLOORS`;
  }
  const [fromFloor, toFloor] = [floorOf(from)!, floorOf(to)!];
  if (toFloor < fromFloor) return null;
  const relation = toFloor === fromFloor ? "a sibling on the same floor" : "a higher floor";
  return `gateway floors: ${folderName(from)} (floor ${fromFloor}) never imports ${relation}, ${folderName(to)} (floor ${toFloor})`;
}

/** Edges that break a rule today and are being removed; each must still exist (else delete it here). */
const KNOWN_EXCEPTIONS: readonly string[] = [];

function sourceFiles(directory: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    if (entry.name.startsWith(".") || SKIPPED_DIRECTORIES.has(entry.name)) continue;
    const path = join(directory, entry.name);
    if (entry.isDirectory()) files.push(...sourceFiles(path));
    else if (entry.isFile() && /\.tsx?$/.test(entry.name) && !entry.name.endsWith(".d.ts")) files.push(path);
  }
  return files;
}

const repositoryPath = (absolute: string): string => relative(ROOT, absolute).split(sep).join("/");

/**
 * The relative imports of one file. TypeScript's own pre-parser reads them, so an import inside a
 * comment or a string is not one, and a dynamic `import("...")` with a literal specifier is.
 */
function importsOf(path: string, text: string): Edge[] {
  const from = repositoryPath(path);
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map((file) => file.fileName)
    .filter((specifier) => specifier.startsWith("./") || specifier.startsWith("../") || specifier.startsWith("/"))
    .map((specifier) => ({ from, to: repositoryPath(resolve(dirname(path), specifier)) }));
}

function violations(edges: readonly Edge[]): string[] {
  return edges.flatMap((edge) => [
    ...RULES.filter((rule) => rule.applies(edge.from) && rule.forbids(edge.to)).map((rule) => `${edge.from} -> ${edge.to}  [${rule.name}]`),
    ...[gatewayFloorViolation(edge)].filter((rule) => rule !== null).map((rule) => `${edge.from} -> ${edge.to}  [${rule}]`),
  ]);
}

const edgeName = (edge: Edge): string => `${edge.from} -> ${edge.to}`;

describe("import rules", () => {
  const files = sourceFiles(ROOT);
  const edges = files.flatMap((file) => importsOf(file, readFileSync(file, "utf8")));

  it("reads the whole tree (a walk that found nothing would pass every rule)", () => {
    for (const folder of ["api/query", "api/gateway", "api/shared", "indexer", "sdk", "scripts", "test", "programs", "dashboard"]) {
      expect(
        edges.some((edge) => edge.from.startsWith(`${folder}/`)),
        `no import found in ${folder}/`,
      ).toBe(true);
    }
  });

  it("sees static, type-only, re-exported, side-effect and dynamic imports, and none in comments or strings", () => {
    const sample = [
      'import { a } from "./static.js";',
      'import type { B } from "../type-only.js";',
      'export * from "./re-export.js";',
      'import "./side-effect.js";',
      'const lazy = await import("./dynamic.js");',
      '// import { c } from "./commented.js";',
      'const text = "import(\\"./in-a-string.js\\")";',
      'import { readFile } from "node:fs/promises";',
      'import pg from "pg";',
    ].join("\n");
    expect(importsOf(join(ROOT, "api/query/sample.ts"), sample).map((edge) => edge.to)).toEqual([
      "api/query/static.js",
      "api/type-only.js",
      "api/query/re-export.js",
      "api/query/side-effect.js",
      "api/query/dynamic.js",
    ]);
  });

  it("names the rule each forbidden edge breaks", () => {
    const planted: Edge[] = [
      { from: "api/query/resolvers/agents.ts", to: "api/gateway/wallets/index.js" },
      { from: "api/shared/auth.ts", to: "api/query/context.js" },
      { from: "sdk/src/client.ts", to: "api/shared/money.js" },
      { from: "sdk/src/resources/policies.ts", to: "sdk/src/cli/rate-limit.js" },
      { from: "sdk/src/server/x402.ts", to: "sdk/src/pay/flow.js" },
      { from: "sdk/src/pay/x402.ts", to: "sdk/src/server/standard.js" },
      { from: "sdk/src/pay/flow.ts", to: "sdk/src/resources/approvals.js" },
      { from: "sdk/src/client.ts", to: "sdk/src/mcp/server.js" },
      { from: "sdk/src/receipts.ts", to: "sdk/src/transport.js" },
      { from: "dashboard/src/views/ledger.tsx", to: "api/query/read/transactions.js" },
      { from: "indexer/pipeline.ts", to: "api/shared/keys.js" },
      { from: "programs/payment_ledger/ts/index.ts", to: "test/support/poll.js" },
      { from: "api/shared/policy/engine.test.ts", to: "test/api/policy-reference.js" },
      { from: "scripts/system.ts", to: "api/gateway/gateway.js" },
      // Inside api/gateway: a lower floor never imports a higher one, nor a folder its sibling.
      { from: "api/gateway/settlement/settlement.ts", to: "api/gateway/invocations/ledger.js" },
      { from: "api/gateway/mpp/submission.ts", to: "api/gateway/x402/payload.js" },
      { from: "api/gateway/chain/ledger.ts", to: "api/gateway/gateway.js" },
      { from: "api/gateway/webhooks/dispatcher.ts", to: "api/gateway/events/gateway.js" },
      { from: "api/gateway/unplaced/thing.ts", to: "api/gateway/chain/ledger.js" },
      // Allowed: down a floor, within a folder, among the top-level files.
      { from: "api/gateway/x402/facilitator.ts", to: "api/gateway/settlement/settler.js" },
      { from: "api/gateway/x402/facilitator.ts", to: "api/gateway/x402/nonces.js" },
      { from: "api/gateway/main.ts", to: "api/gateway/gateway.js" },
    ];
    expect(violations(planted)).toEqual([
      "api/query/resolvers/agents.ts -> api/gateway/wallets/index.js  [api/query never imports api/gateway]",
      "api/shared/auth.ts -> api/query/context.js  [api/shared imports neither api/query nor api/gateway]",
      "sdk/src/client.ts -> api/shared/money.js  [sdk/ imports nothing outside sdk/]",
      "sdk/src/resources/policies.ts -> sdk/src/cli/rate-limit.js  [sdk resources never import sdk cli]",
      "sdk/src/resources/policies.ts -> sdk/src/cli/rate-limit.js  [sdk cli and mcp import the client, never the reverse]",
      "sdk/src/server/x402.ts -> sdk/src/pay/flow.js  [sdk server half never imports the client half]",
      "sdk/src/pay/x402.ts -> sdk/src/server/standard.js  [sdk client half never imports the server half]",
      "sdk/src/pay/flow.ts -> sdk/src/resources/approvals.js  [sdk pay never imports sdk resources]",
      "sdk/src/client.ts -> sdk/src/mcp/server.js  [sdk cli and mcp import the client, never the reverse]",
      "sdk/src/receipts.ts -> sdk/src/transport.js  [sdk shared modules import neither half]",
      "dashboard/src/views/ledger.tsx -> api/query/read/transactions.js  [dashboard/ imports nothing outside dashboard/]",
      "indexer/pipeline.ts -> api/shared/keys.js  [indexer/ imports nothing from api/ or scripts/]",
      "programs/payment_ledger/ts/index.ts -> test/support/poll.js  [production code imports neither scripts/ nor test/]",
      "api/gateway/settlement/settlement.ts -> api/gateway/invocations/ledger.js  [gateway floors: api/gateway/settlement (floor 2) never imports a higher floor, api/gateway/invocations (floor 3)]",
      "api/gateway/mpp/submission.ts -> api/gateway/x402/payload.js  [gateway floors: api/gateway/mpp (floor 4) never imports a sibling on the same floor, api/gateway/x402 (floor 4)]",
      "api/gateway/chain/ledger.ts -> api/gateway/gateway.js  [gateway floors: api/gateway/chain (floor 1) never imports a higher floor, api/gateway/ (top level) (floor 7)]",
      "api/gateway/webhooks/dispatcher.ts -> api/gateway/events/gateway.js  [gateway floors: api/gateway/webhooks (floor 1) never imports a higher floor, api/gateway/events (floor 2)]",
      "api/gateway/unplaced/thing.ts -> api/gateway/chain/ledger.js  [api/gateway/unplaced has no floor in GATEWAY_FLOORS]",
    ]);
  });

  it("no edge crosses a forbidden boundary", () => {
    const offending = violations(edges.filter((edge) => !KNOWN_EXCEPTIONS.includes(edgeName(edge))));
    expect(offending, `forbidden imports:\n${offending.join("\n")}`).toEqual([]);
  });

  it("every known exception is still an edge (delete the ones that are gone)", () => {
    const present = new Set(edges.map(edgeName));
    expect(KNOWN_EXCEPTIONS.filter((exception) => !present.has(exception))).toEqual([]);
  });
});
