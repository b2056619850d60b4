/**
 * The preflight: what a configuration that parsed says about the cluster, checked against the
 * cluster before anything is served or written. The RPC endpoint answers and serves the configured
 * network (its genesis hash); the program is deployed and executable at PROGRAM_ID; its config
 * account exists and names the configured authority, mint (and decimals) and treasury; the
 * treasury's token account exists; the authority and the fee payer hold at least the SOL floor.
 * The database answers. Each failure is one line naming the variable to fix; only reads.
 */
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, type Keypair, LAMPORTS_PER_SOL, type PublicKey } from "@solana/web3.js";
import pg from "pg";
import { decodeConfigAccount } from "../../programs/payment_ledger/ts/config-account.js";
import { configPda } from "../../programs/payment_ledger/ts/pda.js";
import { type Cluster, PUBLIC_GENESIS_PREFIX } from "./services.js";

/** Each RPC or database call of the preflight gives up after this long. */
export const PREFLIGHT_TIMEOUT_MS = 10_000;

export interface PreflightResult {
  /** One line per failure, `NAME: what is wrong; expected what`. */
  readonly problems: readonly string[];
  /** What was found, one line per fact (printed by `--check`). */
  readonly facts: readonly string[];
}

function withTimeout<T>(work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${PREFLIGHT_TIMEOUT_MS} ms`)), PREFLIGHT_TIMEOUT_MS);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

const reason = (error: unknown): string => {
  const cause = (error as { cause?: { code?: string } }).cause?.code;
  const message = error instanceof Error ? error.message : String(error);
  return cause === undefined ? message : `${message} (${cause})`;
};

const sol = (lamports: bigint): string => {
  const whole = lamports / BigInt(LAMPORTS_PER_SOL);
  const fraction = (lamports % BigInt(LAMPORTS_PER_SOL)).toString().padStart(9, "0").replace(/0+$/, "");
  return fraction === "" ? whole.toString() : `${whole}.${fraction}`;
};

/** The database answers a read (nothing is written: migrations come after the preflight). */
export async function checkDatabase(url: string, problems: string[], facts: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: PREFLIGHT_TIMEOUT_MS });
  client.on("error", () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ version: string }>("SHOW server_version");
    facts.push(`database: PostgreSQL ${rows[0]?.version ?? "?"} answers`);
  } catch (error) {
    // The URL may hold a password: name the host only.
    const host = new URL(url).host;
    problems.push(`DATABASE_URL: the server at ${host} did not answer (${reason(error)}); expected a reachable PostgreSQL server`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The RPC endpoint answers and serves the configured network: its genesis hash, or the one problem. */
export async function checkNetwork(cluster: Cluster, connection: Connection): Promise<{ genesis: string } | { problem: string }> {
  let genesis: string;
  try {
    genesis = await withTimeout(connection.getGenesisHash(), "getGenesisHash");
  } catch (error) {
    return {
      problem: `SOLANA_RPC_URL: ${cluster.rpcUrl} is not reachable (${reason(error)}); expected the JSON-RPC endpoint of ${cluster.network}`,
    };
  }
  if (cluster.network === "solana-localnet") {
    // Unset only for init-cluster, which prints it.
    if (cluster.genesisHash !== undefined && genesis !== cluster.genesisHash) {
      return {
        problem: `SOLANA_GENESIS_HASH: ${cluster.rpcUrl} serves the cluster ${genesis}, not ${cluster.genesisHash}; expected the hash of the cluster it serves`,
      };
    }
  } else if (!genesis.startsWith(PUBLIC_GENESIS_PREFIX[cluster.network])) {
    return {
      problem: `SOLANA_NETWORK: ${cluster.network} but ${cluster.rpcUrl} serves the cluster ${genesis}; expected an RPC endpoint of ${cluster.network}`,
    };
  }
  return { genesis };
}

/** The checks against the cluster, each failure one line. */
export async function checkCluster(cluster: Cluster, feePayer: Keypair | undefined, problems: string[], facts: string[]): Promise<void> {
  const connection = new Connection(cluster.rpcUrl, "confirmed");
  const network = await checkNetwork(cluster, connection);
  if ("problem" in network) {
    problems.push(network.problem);
    return;
  }
  const { genesis } = network;
  facts.push(`cluster: ${cluster.network}, genesis ${genesis}, at ${cluster.rpcUrl}`);

  const config = configPda(cluster.programId).address;
  const treasuryToken = getAssociatedTokenAddressSync(cluster.mint, cluster.treasury.publicKey, true);
  const payers = [{ name: "LEDGER_AUTHORITY_KEYPAIR", key: cluster.authority }];
  if (feePayer !== undefined) payers.push({ name: "FEE_PAYER_KEYPAIR", key: feePayer });
  let accounts: Awaited<ReturnType<Connection["getMultipleAccountsInfo"]>>;
  try {
    accounts = await withTimeout(
      connection.getMultipleAccountsInfo([cluster.programId, config, treasuryToken, cluster.mint, ...payers.map((p) => p.key.publicKey)]),
      "getMultipleAccounts",
    );
  } catch (error) {
    problems.push(`SOLANA_RPC_URL: ${cluster.rpcUrl} failed getMultipleAccounts (${reason(error)}); expected a working JSON-RPC endpoint`);
    return;
  }
  const [program, configAccount, treasuryAccount, mintAccount, ...payerAccounts] = accounts;
  const programId = cluster.programId.toBase58();
  if (program == null) {
    problems.push(`PROGRAM_ID: no account at ${programId} on ${cluster.network}; expected the deployed payment_ledger program`);
  } else if (!program.executable) {
    problems.push(`PROGRAM_ID: ${programId} is an account but not an executable program; expected the deployed payment_ledger program`);
  } else {
    facts.push(`program: ${programId} is deployed and executable`);
  }
  if (mintAccount == null) {
    problems.push(`SETTLEMENT_MINT: no account at ${cluster.mint.toBase58()} on ${cluster.network}; expected the settlement mint`);
  }
  if (program?.executable === true) {
    if (configAccount == null) {
      problems.push(
        `PROGRAM_ID: the program's config account ${config.toBase58()} does not exist; expected the program initialized (npm run admin -- init-cluster)`,
      );
    } else {
      const state = decodeConfigAccount(configAccount.data);
      const compare = (name: string, what: string, configured: string, onChain: string): void => {
        if (configured !== onChain) problems.push(`${name}: ${configured} is not the config's ${what} ${onChain}; expected ${onChain}`);
      };
      compare("LEDGER_AUTHORITY_KEYPAIR", "authority", cluster.authority.publicKey.toBase58(), state.authority.toBase58());
      compare("SETTLEMENT_MINT", "settlement mint", cluster.mint.toBase58(), state.settlementMint.toBase58());
      compare("TREASURY_KEYPAIR", "treasury", cluster.treasury.publicKey.toBase58(), state.treasury.toBase58());
      compare("SETTLEMENT_MINT_DECIMALS", "decimals", String(cluster.decimals), String(state.decimals));
      facts.push(
        `config: ${config.toBase58()} names authority ${state.authority.toBase58()}, mint ${state.settlementMint.toBase58()}, treasury ${state.treasury.toBase58()}`,
      );
    }
  }
  if (treasuryAccount == null) {
    problems.push(
      `TREASURY_KEYPAIR: the treasury's token account ${treasuryToken.toBase58()} of SETTLEMENT_MINT does not exist; expected it created and funded (npm run admin -- init-cluster creates it)`,
    );
  } else {
    facts.push(`treasury token account: ${treasuryToken.toBase58()}`);
  }
  payers.forEach((payer, index) => {
    const lamports = BigInt(payerAccounts[index]?.lamports ?? 0);
    const address = payer.key.publicKey.toBase58();
    if (lamports < cluster.minFeePayerLamports) {
      problems.push(
        `${payer.name}: ${address} holds ${sol(lamports)} SOL; expected at least ${sol(cluster.minFeePayerLamports)} SOL (MIN_FEE_PAYER_SOL) for fees and rent`,
      );
    } else {
      facts.push(`${payer.name}: ${address} holds ${sol(lamports)} SOL (floor ${sol(cluster.minFeePayerLamports)})`);
    }
  });
}

/** The whole preflight of a process: its database (when it has one) and its cluster, at once. */
export async function preflight(target: {
  readonly databaseUrl?: string;
  readonly cluster: Cluster;
  readonly feePayer?: Keypair | undefined;
}): Promise<PreflightResult> {
  const problems: string[] = [];
  const facts: string[] = [];
  const databaseProblems: string[] = [];
  const databaseFacts: string[] = [];
  await Promise.all([
    target.databaseUrl === undefined ? Promise.resolve() : checkDatabase(target.databaseUrl, databaseProblems, databaseFacts),
    checkCluster(target.cluster, target.feePayer, problems, facts),
  ]);
  return { problems: [...databaseProblems, ...problems], facts: [...databaseFacts, ...facts] };
}

/** The indexer's preflight: the RPC endpoint answers and the program it follows is deployed there. */
export async function indexerPreflight(rpcUrl: string, programId: PublicKey): Promise<PreflightResult> {
  const connection = new Connection(rpcUrl, "confirmed");
  try {
    const program = await withTimeout(connection.getAccountInfo(programId), "getAccountInfo");
    if (program === null || !program.executable) {
      return {
        problems: [
          `PROGRAM_ID: no executable program at ${programId.toBase58()} on ${rpcUrl}; expected the deployed payment_ledger program`,
        ],
        facts: [],
      };
    }
    return { problems: [], facts: [`program: ${programId.toBase58()} is deployed and executable`] };
  } catch (error) {
    return {
      problems: [`SOLANA_RPC_URL: ${rpcUrl} is not reachable (${reason(error)}); expected the cluster's JSON-RPC endpoint`],
      facts: [],
    };
  }
}
