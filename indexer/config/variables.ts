/**
 * Every environment variable a process of the system reads, with who reads it and one line on
 * what it holds. This table is the source of `.env.example` (`npm run env:example`) and of the
 * documentation of each entry point; the readers (./services.ts) refuse a name that is not here.
 *
 * It sits in indexer/ because every entry point imports it, and the indexer may import nothing
 * from api/ or scripts/ (test/architecture/imports.test.ts).
 */

/** The processes that read configuration. `local` is the combined local system (`npm start`). */
export type Service = "gateway" | "query" | "indexer" | "admin" | "local";

export interface Variable {
  readonly name: string;
  /** The processes that read it, and whether each requires it. */
  readonly readBy: Readonly<Partial<Record<Service, "required" | "optional">>>;
  /** One line: what it holds and what it defaults to. */
  readonly describe: string;
  /** The value written in `.env.example` (a placeholder for secrets). */
  readonly example: string;
}

const CLUSTER_SERVICES = { gateway: "required", admin: "required" } as const;

export const VARIABLES: readonly Variable[] = [
  {
    name: "DATABASE_URL",
    readBy: { gateway: "required", query: "required", indexer: "required", admin: "optional", local: "optional" },
    describe: "PostgreSQL URL of the system's database (the local system and admin: an embedded server when unset)",
    example: "postgres://apg:CHANGE_ME@db.internal:5432/apg",
  },
  {
    name: "DATABASE_READ_URL",
    readBy: { gateway: "optional", query: "optional" },
    describe: "a streaming replica of DATABASE_URL for the read models (docs/scaling.md); unset: the primary",
    example: "",
  },
  {
    name: "SOLANA_RPC_URL",
    readBy: { ...CLUSTER_SERVICES, indexer: "required", query: "optional" },
    describe: "the cluster's JSON-RPC endpoint (http or https)",
    example: "https://api.devnet.solana.com",
  },
  {
    name: "SOLANA_NETWORK",
    readBy: { ...CLUSTER_SERVICES, query: "optional" },
    describe: "the cluster: solana-devnet, solana-mainnet, solana-testnet, or solana-localnet for a custom cluster",
    example: "solana-devnet",
  },
  {
    name: "SOLANA_GENESIS_HASH",
    readBy: { gateway: "optional", admin: "optional" },
    describe:
      "the cluster's genesis hash (solana genesis-hash; init-cluster prints it); required for solana-localnet, checked by the preflight",
    example: "",
  },
  {
    name: "PROGRAM_ID",
    readBy: { ...CLUSTER_SERVICES, indexer: "required" },
    describe: "address of the deployed payment_ledger program (the services take it from here: no rebuild for another address)",
    example: "2Mxhjn4faicAv1UyhyFyiBnVbgahkgxmjCVpEkGffD3t",
  },
  {
    name: "SETTLEMENT_MINT",
    readBy: { ...CLUSTER_SERVICES, query: "optional" },
    describe: "base58 mint payments settle in (USDC on the cluster)",
    example: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
  },
  {
    name: "SETTLEMENT_MINT_DECIMALS",
    readBy: { gateway: "optional", admin: "optional" },
    describe: "decimals of SETTLEMENT_MINT (default 6; the preflight checks it against the mint)",
    example: "6",
  },
  {
    name: "LEDGER_AUTHORITY_KEYPAIR",
    readBy: { ...CLUSTER_SERVICES },
    describe: "path of the program's config authority keypair (Solana CLI JSON, 0600): signs every record and pays fees",
    example: "/etc/apg/keys/authority.json",
  },
  {
    name: "TREASURY_KEYPAIR",
    readBy: { ...CLUSTER_SERVICES },
    describe: "path of the treasury keypair whose token account funds agent wallets (wallet.fund)",
    example: "/etc/apg/keys/treasury.json",
  },
  {
    name: "FEE_PAYER_KEYPAIR",
    readBy: { gateway: "optional" },
    describe: "path of a dedicated SOL-only key that co-signs payers' own transfers; unset: those routes answer 503",
    example: "",
  },
  {
    name: "MIN_FEE_PAYER_SOL",
    readBy: { gateway: "optional", admin: "optional" },
    describe: "SOL the authority and the fee payer must hold for the preflight to pass (default 0.05)",
    example: "0.05",
  },
  {
    name: "ATTESTED_PAYER_QUOTA",
    readBy: { gateway: "optional" },
    describe: "new outside payers whose payment_ledger account the authority pays, per account in 24 h (default 100)",
    example: "100",
  },
  {
    name: "LOW_BALANCE_FLOOR_SOL",
    readBy: { gateway: "optional" },
    describe: "SOL below which the fee payer's or authority's balance raises the low-balance alert (default 1)",
    example: "1",
  },
  {
    name: "WALLET_ENCRYPTION_KEY",
    readBy: { gateway: "required", local: "optional" },
    describe: "32 random bytes, base64, sealing agent wallet keys (openssl rand -base64 32)",
    example: "CHANGE_ME_base64_of_32_random_bytes",
  },
  {
    name: "WALLET_ENCRYPTION_KEY_VERSION",
    readBy: { gateway: "optional" },
    describe: "version name of WALLET_ENCRYPTION_KEY (default v1)",
    example: "v1",
  },
  {
    name: "WALLET_ENCRYPTION_RETIRED_KEYS",
    readBy: { gateway: "optional" },
    describe: "keys being rotated out, version:base64 separated by commas",
    example: "",
  },
  {
    name: "WEBHOOK_SECRETS_KEY",
    readBy: { gateway: "required", local: "optional" },
    describe: "32 random bytes, base64 or 64 hex digits, sealing webhook and alert secrets",
    example: "CHANGE_ME_base64_of_32_random_bytes",
  },
  {
    name: "WEBHOOK_ALLOW_LOOPBACK",
    readBy: { gateway: "optional", local: "optional" },
    describe: "true: webhook and alert targets on loopback are accepted and delivered (local development and tests only; default false)",
    example: "false",
  },
  {
    name: "EXPLORER_CLUSTER",
    readBy: { gateway: "optional", indexer: "optional" },
    describe: "explorer links: mainnet-beta, devnet, testnet or an RPC URL (default: the cluster's name, else the RPC URL)",
    example: "devnet",
  },
  {
    name: "GATEWAY_PUBLIC_URL",
    readBy: { gateway: "optional" },
    describe:
      "the gateway's public base URL (https://gateway.example): the signed approval links of approval.requested start with it; unset: path-only links",
    example: "",
  },
  {
    name: "SMTP_URL",
    readBy: { gateway: "optional", local: "optional" },
    describe: "smtp:// or smtps:// URL for e-mail alerts; unset: no e-mail",
    example: "",
  },
  {
    name: "YELLOWSTONE_ENDPOINT",
    readBy: { indexer: "optional" },
    describe: "Yellowstone gRPC endpoint the indexer follows (RPC stays the fallback); unset: RPC polling",
    example: "",
  },
  {
    name: "YELLOWSTONE_X_TOKEN",
    readBy: { indexer: "optional" },
    describe: "the Yellowstone provider's access token",
    example: "",
  },
  {
    name: "QUERY_WORKERS",
    readBy: { query: "optional" },
    describe: "processes serving the query service on one port (default 1; the machine's core count uses every core: docs/performance.md)",
    example: "1",
  },
  {
    name: "PORT",
    readBy: { gateway: "optional", query: "optional", local: "optional" },
    describe: "HTTP port (default 4000; the query service beside a gateway needs another, e.g. 4001)",
    example: "4000",
  },
  {
    name: "HOST",
    readBy: { gateway: "optional", query: "optional", local: "optional" },
    describe: "address to listen on (default 127.0.0.1; put a TLS proxy in front)",
    example: "127.0.0.1",
  },
  {
    name: "LOG_LEVEL",
    readBy: { gateway: "optional", query: "optional", indexer: "optional", local: "optional" },
    describe: "pino level: fatal, error, warn, info, debug or trace (default info)",
    example: "info",
  },
  {
    name: "APG_DATA_DIR",
    readBy: { local: "optional", admin: "optional" },
    describe: "the local system's state directory (default .data/)",
    example: "",
  },
  {
    name: "LOCALNET_RPC_PORT",
    readBy: { local: "optional" },
    describe: "the local ledger's RPC port (default 8899; its websocket the next one)",
    example: "",
  },
];

export function variable(name: string): Variable {
  const found = VARIABLES.find((v) => v.name === name);
  if (found === undefined) throw new Error(`configuration reads ${name}, which indexer/config/variables.ts does not list`);
  return found;
}
