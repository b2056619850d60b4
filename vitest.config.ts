import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // Without DATABASE_URL, one embedded PostgreSQL for the whole run (each suite its own database).
    globalSetup: ["test/support/database-server.ts"],
    include: [
      "test/**/*.test.ts",
      "programs/**/ts/**/*.test.ts",
      "indexer/**/*.test.ts",
      "api/**/*.test.ts",
      "sdk/src/**/*.test.ts",
      // The dashboard's pure modules (money, the live feed's merge); its browser tests are test/dashboard/.
      "dashboard/src/**/*.test.ts",
    ],
    // Integration suites start a local ledger (a few seconds) and send hundreds of transactions.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // One ledger per integration file; two cores, so keep files from competing for them.
    fileParallelism: false,
  },
});
