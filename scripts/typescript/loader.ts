/**
 * The `node` arguments that run a TypeScript entry point as the services run it (./register.mjs),
 * from the repository root: for the scripts, tests and benches that start a service as an operator
 * would (the package.json scripts and docs/deploy/*.service spell the same out).
 */
export const TYPESCRIPT_LOADER = ["--import", "./scripts/typescript/register.mjs"] as const;
