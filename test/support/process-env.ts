/**
 * What a suite needs to run a service as its own OS process (`api/gateway/main.ts`): a port known
 * in advance (main.ts takes PORT as given), keypair files its environment can name, and that
 * environment for a local ledger and database.
 */
import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import type { Keypair } from "@solana/web3.js";
import { generateWalletEncryptionKey } from "../../api/gateway/wallets/index.js";
import { SecretBox } from "../../api/shared/secret-box.js";
import type { Localnet } from "../../scripts/localnet.js";

/** A port nothing listens on now on `host`. */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = address !== null && typeof address === "object" ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** Writes `keypair` as `<dir>/<name>.json` (the 64-byte JSON array, 0600); returns its path. */
export async function writeKeypairFile(dir: string, name: string, keypair: Keypair): Promise<string> {
  const path = join(dir, `${name}.json`);
  await writeFile(path, JSON.stringify(Array.from(keypair.secretKey)), { mode: 0o600 });
  return path;
}

/**
 * The test's own environment plus what `api/gateway/main.ts` reads to serve on `port` against the
 * local ledger and `databaseUrl`, with fresh wallet and webhook keys (keypair files in `keyDir`);
 * SMTP_URL is left out so no suite mails by accident.
 */
export async function gatewayProcessEnv(options: {
  readonly localnet: Localnet;
  readonly databaseUrl: string;
  readonly keyDir: string;
  readonly port: number;
  readonly host: string;
}): Promise<NodeJS.ProcessEnv> {
  const { localnet, keyDir } = options;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: options.databaseUrl,
    SOLANA_RPC_URL: localnet.rpcUrl,
    SOLANA_NETWORK: "solana-localnet",
    SOLANA_GENESIS_HASH: localnet.info.genesisHash,
    SETTLEMENT_MINT: localnet.info.mint.toBase58(),
    SETTLEMENT_MINT_DECIMALS: String(localnet.info.decimals),
    LEDGER_AUTHORITY_KEYPAIR: await writeKeypairFile(keyDir, "authority", localnet.keypairs.authority),
    PROGRAM_ID: localnet.info.programId.toBase58(),
    TREASURY_KEYPAIR: await writeKeypairFile(keyDir, "treasury", localnet.keypairs.treasury),
    WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey(),
    WEBHOOK_SECRETS_KEY: SecretBox.generateKey(),
    EXPLORER_CLUSTER: localnet.rpcUrl,
    PORT: String(options.port),
    HOST: options.host,
    LOG_LEVEL: "info",
  };
  delete env.SMTP_URL;
  return env;
}
