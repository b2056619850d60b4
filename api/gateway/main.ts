/**
 * `tsx api/gateway/main.ts [--env-file PATH] [--check]` (`npm run gateway`): the gateway on any
 * Solana cluster, configured from the environment (every variable: `.env.example`, read and
 * checked by indexer/config before the database or the chain is touched; a refused configuration
 * exits 2 with one line per problem). Then the preflight (indexer/config/preflight.ts) checks the
 * database and the cluster against the configuration, read-only, and refuses the same way;
 * `--check` stops there (exit 0 when it passed: what a deploy pipeline runs). It serves the gateway's REST /v1 routes and, on the same port, the
 * query service (GraphQL and the read views) over the same database, and runs the gateway's loops
 * (reconciler, sweeper, webhook dispatcher, housekeeping). The indexer runs as its own process
 * (`npm run indexer`), following the same cluster into the same database. docs/deploy.md is the
 * operator's guide.
 *
 * The card rail uses the named stand-in processor (api/gateway/card) until a real one is wired.
 * Exit codes: 0 stopped by a signal (or `--check` passed), 1 failed to start, 2 configuration or
 * preflight refused.
 */
import { configOrExit, gatewayConfig, refuse } from "../../indexer/config/index.js";

async function main(commandLine: readonly string[]): Promise<void> {
  const { config, argv } = configOrExit("gateway", commandLine, gatewayConfig);
  const unknown = argv.filter((arg) => arg !== "--check");
  if (unknown.length > 0) refuse("gateway", [`${unknown[0]}: unknown option; expected --env-file PATH or --check`]);
  // Loaded only now: a refused configuration answers in a moment, before the service's modules load.
  const { preflight } = await import("../../indexer/config/preflight.js");
  const checked = await preflight({ databaseUrl: config.databaseUrl, cluster: config.cluster, feePayer: config.feePayer });
  if (checked.problems.length > 0) refuse("gateway", checked.problems);
  if (argv.includes("--check")) {
    process.stdout.write(`${[...checked.facts, "preflight passed"].map((line) => `gateway: ${line}`).join("\n")}\n`);
    process.exit(0);
  }
  const { serveGateway } = await import("./serve.js");
  await serveGateway(config);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
