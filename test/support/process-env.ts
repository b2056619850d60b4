/**
 * What a suite needs to run a service as its own OS process (`api/gateway/main.ts`): a port known
 * in advance (main.ts takes PORT as given) and keypair files its environment can name.
 */
import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import type { Keypair } from "@solana/web3.js";

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
