/**
 * `npm run admin -- init-cluster [--env-file PATH]`: creates the payment_ledger config on a
 * cluster the program was just deployed on (`initialize` with the configured authority, mint and
 * treasury) and the treasury's token account, then prints the variables the processes need.
 * Idempotent: on a cluster already initialized it says so and shows the config; a config that
 * names other keys than the configuration is refused (exit 2), since `initialize` runs once.
 */
import { setTimeout as delay } from "node:timers/promises";
import { createAssociatedTokenAccountIdempotentInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, Transaction, type TransactionInstruction } from "@solana/web3.js";
import type { Cluster } from "../indexer/config/index.js";
import { checkNetwork } from "../indexer/config/preflight.js";
import { decodeConfigAccount, initializeInstruction } from "../programs/payment_ledger/ts/index.js";
import { configPda } from "../programs/payment_ledger/ts/pda.js";

const CONFIRM_TIMEOUT_MS = 60_000;

export interface InitClusterResult {
  /** `initialized` when this run created the config, `already` when it existed. */
  readonly outcome: "initialized" | "already";
  /** Lines for the operator: what was done, the config, the variables to set. */
  readonly lines: readonly string[];
  /** Problems that refuse the run (one line each); empty on success. */
  readonly problems: readonly string[];
}

async function confirm(connection: Connection, signature: string): Promise<void> {
  const deadline = Date.now() + CONFIRM_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const status = (await connection.getSignatureStatuses([signature])).value[0];
    if (status?.err != null) throw new Error(`transaction ${signature} failed: ${JSON.stringify(status.err)}`);
    if (status?.confirmationStatus === "confirmed" || status?.confirmationStatus === "finalized") return;
    await delay(200);
  }
  throw new Error(`transaction ${signature} not confirmed within ${CONFIRM_TIMEOUT_MS} ms`);
}

/** Signs `instructions` with the authority (the fee payer), sends them and waits for confirmation. */
async function sendAsAuthority(connection: Connection, cluster: Cluster, ...instructions: TransactionInstruction[]): Promise<string> {
  const transaction = new Transaction().add(...instructions);
  const { blockhash } = await connection.getLatestBlockhash();
  transaction.feePayer = cluster.authority.publicKey;
  transaction.recentBlockhash = blockhash;
  transaction.sign(cluster.authority);
  const signature = await connection.sendRawTransaction(transaction.serialize());
  await confirm(connection, signature);
  return signature;
}

export async function initCluster(cluster: Cluster): Promise<InitClusterResult> {
  const connection = new Connection(cluster.rpcUrl, "confirmed");
  const network = await checkNetwork(cluster, connection);
  if ("problem" in network) return { outcome: "already", lines: [], problems: [network.problem] };
  const { genesis } = network;
  const config = configPda(cluster.programId).address;
  const treasuryToken = getAssociatedTokenAddressSync(cluster.mint, cluster.treasury.publicKey, true);
  const createTreasuryToken = (): TransactionInstruction =>
    createAssociatedTokenAccountIdempotentInstruction(cluster.authority.publicKey, treasuryToken, cluster.treasury.publicKey, cluster.mint);
  const program = await connection.getAccountInfo(cluster.programId);
  if (program === null || !program.executable) {
    return {
      outcome: "already",
      lines: [],
      problems: [
        `PROGRAM_ID: no executable program at ${cluster.programId.toBase58()}; expected payment_ledger deployed there first (docs/deploy.md)`,
      ],
    };
  }
  const existing = await connection.getAccountInfo(config);
  const lines: string[] = [];
  let outcome: InitClusterResult["outcome"];
  if (existing === null) {
    const signature = await sendAsAuthority(
      connection,
      cluster,
      await initializeInstruction({
        programId: cluster.programId,
        authority: cluster.authority.publicKey,
        settlementMint: cluster.mint,
        treasury: cluster.treasury.publicKey,
      }),
      createTreasuryToken(),
    );
    lines.push(`initialized: config ${config.toBase58()} created by ${signature}`);
    outcome = "initialized";
  } else {
    lines.push(`already initialized: config ${config.toBase58()} exists`);
    outcome = "already";
  }
  const account = await connection.getAccountInfo(config);
  if (account === null) throw new Error(`config ${config.toBase58()} not found after initialize`);
  const state = decodeConfigAccount(account.data);
  lines.push(
    `  authority  ${state.authority.toBase58()}`,
    `  mint       ${state.settlementMint.toBase58()} (${state.decimals} decimals)`,
    `  treasury   ${state.treasury.toBase58()}`,
  );
  const problems: string[] = [];
  const compare = (name: string, what: string, configured: string, onChain: string): void => {
    if (configured !== onChain) problems.push(`${name}: ${configured} is not the config's ${what} ${onChain}; expected ${onChain}`);
  };
  compare("LEDGER_AUTHORITY_KEYPAIR", "authority", cluster.authority.publicKey.toBase58(), state.authority.toBase58());
  compare("SETTLEMENT_MINT", "settlement mint", cluster.mint.toBase58(), state.settlementMint.toBase58());
  compare("TREASURY_KEYPAIR", "treasury", cluster.treasury.publicKey.toBase58(), state.treasury.toBase58());
  if (problems.length > 0) return { outcome, lines, problems };

  if ((await connection.getAccountInfo(treasuryToken)) === null) {
    const signature = await sendAsAuthority(connection, cluster, createTreasuryToken());
    lines.push(`  treasury token account ${treasuryToken.toBase58()} created by ${signature}`);
  } else {
    lines.push(`  treasury token account ${treasuryToken.toBase58()}`);
  }
  lines.push(
    "",
    "Set these in the environment of the gateway and `npm run admin` (and SOLANA_RPC_URL, PROGRAM_ID for the indexer):",
    `SOLANA_RPC_URL=${cluster.rpcUrl}`,
    `SOLANA_NETWORK=${cluster.network}`,
    `SOLANA_GENESIS_HASH=${genesis}`,
    `PROGRAM_ID=${cluster.programId.toBase58()}`,
    `SETTLEMENT_MINT=${state.settlementMint.toBase58()}`,
    `SETTLEMENT_MINT_DECIMALS=${state.decimals}`,
    `LEDGER_AUTHORITY_KEYPAIR=${cluster.keyFiles.authority}`,
    `TREASURY_KEYPAIR=${cluster.keyFiles.treasury}`,
  );
  return { outcome, lines, problems };
}
