/**
 * A gateway with channel sessions on the real local ledger and a fresh Postgres, driven over its
 * REST handler in process: accounts, keys, funded agents, and the checks every channel money test
 * ends with (ledger balances of payer, escrow and payee; our tables; the REST answers). Test files only.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Keypair, LAMPORTS_PER_SOL, PublicKey, SystemProgram, Transaction, type TransactionInstruction } from "@solana/web3.js";
import bs58 from "bs58";
import { expect } from "vitest";
import { ChannelSessions } from "../../../api/gateway/channels/index.js";
import { createGatewayHandler } from "../../../api/gateway/http/index.js";
import { LedgerInvocations } from "../../../api/gateway/invocations/index.js";
import { Settlement } from "../../../api/gateway/settlement/index.js";
import {
  AgentWallets,
  createAgentWallet,
  generateWalletEncryptionKey,
  keystoreFromEnv,
  LocalTreasuryFundingSource,
} from "../../../api/gateway/wallets/index.js";
import { localSettlementLedger, type SettlementLedger, tokenBalanceUnits } from "../../../api/gateway/chain/index.js";
import { submit } from "../../../api/gateway/chain/ledger.js";
import { SecretBox } from "../../../api/gateway/webhooks/index.js";
import { createAccount, issueApiKey } from "../../../api/shared/keys.js";
import { decodeChannelAccount, escrowPda, PAYMENT_LEDGER_PROGRAM_ID } from "../../../programs/payment_ledger/ts/index.js";
import { type Localnet, startLocalnet } from "../../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../../support/rest.js";

export const USDC = 1_000_000n;
export const SERVICE = "https://api.example.com";

export interface ChannelGateway {
  readonly localnet: Localnet;
  readonly db: FreshDatabase;
  readonly ledger: SettlementLedger;
  readonly wallets: AgentWallets;
  readonly channels: ChannelSessions;
  /** record_payment and invocations (to open an agents.invoke invocation). */
  readonly settlement: Settlement;
  readonly walletKey: string;
  readonly accountId: string;
  readonly apiKey: string;
  /** A key of another account (a payee presenting vouchers). */
  readonly payeeKey: string;
  call(method: string, path: string, body?: unknown, options?: { idem?: string; key?: string }): Promise<RestAnswer>;
  /** A new funded agent of the account; its public id. */
  newAgent(usdcUnits?: bigint): Promise<string>;
  stop(): Promise<void>;
}

let serial = 0;

export async function startChannelGateway(): Promise<ChannelGateway> {
  const [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  const ledger = localSettlementLedger(localnet);
  const walletKey = generateWalletEncryptionKey();
  const keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: walletKey });
  const wallets = new AgentWallets({
    pool: db.pool,
    keystore,
    ledger,
    fundingSource: LocalTreasuryFundingSource.fromLocalnet(ledger, localnet),
  });
  const settlement = new Settlement({
    pool: db.pool,
    wallets,
    ledger,
    invocations: new LedgerInvocations({ pool: db.pool, wallets, ledger }),
  });
  const channels = new ChannelSessions({ pool: db.pool, ledger, wallets, invocations: settlement });
  const handle = createGatewayHandler({
    pool: db.pool,
    wallets,
    keystore,
    channels,
    invocations: settlement,
    secretBox: new SecretBox(randomBytes(32)),
  });
  const accountId = await createAccount(db.pool, "channels");
  const apiKey = (await issueApiKey(db.pool, accountId)).apiKey;
  const payeeKey = (await issueApiKey(db.pool, await createAccount(db.pool, "a paid API"))).apiKey;
  return {
    localnet,
    db,
    ledger,
    wallets,
    channels,
    settlement,
    walletKey,
    accountId,
    apiKey,
    payeeKey,
    call: (method, path, body, options = {}) =>
      restCall(handle, method, path, { key: options.key ?? apiKey, body, ...(options.idem === undefined ? {} : { idem: options.idem }) }),
    async newAgent(usdcUnits = 10n * USDC) {
      const agentId = `agent-${++serial}-${randomUUID().slice(0, 8)}`;
      await createAgentWallet(db.pool, keystore, { accountId, agentId });
      if (usdcUnits > 0n) await wallets.fund(agentId, usdcUnits);
      return agentId;
    },
    async stop() {
      await localnet.stop();
      await db.drop();
    },
  };
}

/** A payee wallet with no account of ours: only its token account receives. */
export function newPayee(): string {
  return Keypair.generate().publicKey.toBase58();
}

export async function balances(gateway: ChannelGateway, payer: string, payee: string, channel: string) {
  const escrow = escrowPda(new PublicKey(channel), PAYMENT_LEDGER_PROGRAM_ID).address;
  const escrowInfo = await gateway.ledger.connection.getAccountInfo(escrow, "confirmed");
  const { unpackAccount } = await import("@solana/spl-token");
  return {
    payer: await tokenBalanceUnits(gateway.ledger, new PublicKey(payer)),
    escrow: escrowInfo === null ? null : unpackAccount(escrow, escrowInfo, escrowInfo.owner).amount,
    payee: await tokenBalanceUnits(gateway.ledger, new PublicKey(payee)),
  };
}

export function payeeTokenAccount(gateway: ChannelGateway, payee: string): PublicKey {
  return getAssociatedTokenAddressSync(gateway.ledger.mint, new PublicKey(payee), true);
}

/** Charge rows by status of a channel. */
export async function chargeStatuses(gateway: ChannelGateway, channel: string): Promise<Record<string, number>> {
  const { rows } = await gateway.db.pool.query<{ status: string; n: number }>(
    "SELECT status, count(*)::int AS n FROM channel_charges WHERE channel = $1 GROUP BY status",
    [channel],
  );
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}

/**
 * The end-of-test agreement: the chain's channel account (or its absence), the escrow and payee
 * balances, our session row and the REST `GET` say the same thing.
 */
export async function expectAgreement(gateway: ChannelGateway, channel: string, payer: string, payerStartUnits: bigint): Promise<void> {
  const got = await gateway.call("GET", `/v1/channels/${channel}`);
  expect(got.status).toBe(200);
  const view = got.body;
  const { rows } = await gateway.db.pool.query<{ settled: string; deposit: string; refunded: string | null; status: string }>(
    "SELECT settled_cumulative::text AS settled, deposit::text AS deposit, refunded::text AS refunded, status FROM channel_sessions WHERE channel = $1",
    [channel],
  );
  const row = rows[0]!;
  const settledByCharges = await gateway.db.pool.query<{ sum: string }>(
    "SELECT coalesce(sum(amount), 0)::text AS sum FROM channel_charges WHERE channel = $1 AND status = 'settled'",
    [channel],
  );
  const settled = BigInt(row.settled);
  expect(BigInt(settledByCharges.rows[0]!.sum)).toBe(settled);
  expect(view.settledCumulativeUnits).toBe(row.settled);
  expect(view.status).toBe(row.status);
  const money = await balances(gateway, payer, view.payee, channel);
  expect(money.payee).toBe(settled);
  if (row.status === "closed") {
    expect(money.escrow).toBeNull();
    expect(BigInt(row.refunded!)).toBe(BigInt(row.deposit) - settled);
    expect(view.refundedUnits).toBe(row.refunded);
    expect(money.payer).toBe(payerStartUnits - settled);
  } else {
    const account = await gateway.ledger.connection.getAccountInfo(new PublicKey(channel), "confirmed");
    const state = decodeChannelAccount(account!.data);
    expect(state.settled.cumulativeUnits).toBe(settled);
    expect(state.settled.sequence.toString()).toBe(view.settledSequence);
    expect(state.depositUnits.toString()).toBe(row.deposit);
    expect(money.escrow).toBe(BigInt(row.deposit) - settled);
    expect(money.payer).toBe(payerStartUnits - BigInt(row.deposit));
  }
}

/** A payee with its own key, funded with SOL for its fees: it acts on chain by itself. */
export async function newPayeeKeypair(gateway: ChannelGateway): Promise<Keypair> {
  const payee = Keypair.generate();
  await sendAs(gateway, gateway.ledger.authority, [
    SystemProgram.transfer({ fromPubkey: gateway.ledger.authority.publicKey, toPubkey: payee.publicKey, lamports: LAMPORTS_PER_SOL / 10 }),
  ]);
  return payee;
}

/** A transaction of `signer` alone (its own fee payer), signed, not sent. */
export async function signAs(gateway: ChannelGateway, signer: Keypair, instructions: readonly TransactionInstruction[]) {
  const { blockhash, lastValidBlockHeight } = await gateway.ledger.connection.getLatestBlockhash("confirmed");
  const transaction = new Transaction({ feePayer: signer.publicKey, blockhash, lastValidBlockHeight }).add(...instructions);
  transaction.sign(signer);
  return { signature: bs58.encode(transaction.signature!), wire: transaction.serialize().toString("base64"), lastValidBlockHeight };
}

/** A real transaction of `signer` alone (its own fee payer), confirmed; throws when it fails. */
export async function sendAs(gateway: ChannelGateway, signer: Keypair, instructions: readonly TransactionInstruction[]): Promise<string> {
  const signed = await signAs(gateway, signer, instructions);
  const result = await submit(gateway.ledger, signed);
  if (result.status !== "confirmed")
    throw new Error(
      `transaction ${signed.signature} did not land: ${JSON.stringify(result, (_, v) => (typeof v === "bigint" ? v.toString() : v))}`,
    );
  return signed.signature;
}
