/**
 * Wallet operations whose answers match the chain, over real HTTP on loopback, the
 * real local ledger and a fresh Postgres:
 *
 * - 50 concurrent fundings and then 50 concurrent withdrawals of one amount (keyless, distinct
 *   keys, and keys shared by several requests): no 5xx, and the acknowledged operations, the
 *   `wallet_operations` rows and the token balance deltas on the chain are exactly the same.
 * - Two operations of the same amount signed with the same blockhash are two transactions.
 * - A funding whose outcome the gateway did not learn is answered 202 `pending` with its
 *   operation (never a failure, never a stored final answer), and resolves from the chain; a
 *   withdrawal likewise stays pending, and is failed only once its blockhash expired unlanded.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { type Connection, Keypair, PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import type { ApiServer } from "../../api/query/server.js";
import { createGatewayServer } from "../../api/gateway/server.js";
import {
  AgentWallets,
  createAgentWallet,
  type FundingSource,
  generateWalletEncryptionKey,
  keystoreFromEnv,
  LocalTreasuryFundingSource,
  treasuryFundingTransaction,
  withdrawalTransaction,
} from "../../api/gateway/wallets/index.js";
import {
  localSettlementLedger,
  MEMO_PROGRAM_ID,
  PaymentPendingError,
  recentBlockhash,
  type SettlementLedger,
  signTransaction,
  tokenBalanceUnits,
} from "../../api/gateway/chain/index.js";
import { SecretBox } from "../../api/gateway/webhooks/index.js";
import { Client } from "../../sdk/src/index.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer as Answer, restCall } from "../support/rest.js";
import { agentKey } from "../support/agent-keys.js";
import { pollUntil } from "../support/poll.js";

let localnet: Localnet;
let db: FreshDatabase;
let ledger: SettlementLedger;
let keystore: ReturnType<typeof keystoreFromEnv>;
let wallets: AgentWallets;
let server: ApiServer;
let baseUrl: string;
let apiKey: string;
/** The account whose funding source loses its answers (see `lossy`). */
let lossyAccount: string;
let lossyKey: string;
/** How the lossy source fails after the treasury's transaction was sent. */
let lossyFailure: "timeout" | "socket" = "timeout";

const USDC = 1_000_000n;

beforeAll(async () => {
  [localnet, db] = await Promise.all([startLocalnet(), createFreshDatabase()]);
  ledger = localSettlementLedger(localnet);
  keystore = keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() });
  const treasury = LocalTreasuryFundingSource.fromLocalnet(ledger, localnet);
  // Sends the real funding, then loses the answer as a timeout or a dropped connection would.
  const lossy: FundingSource = {
    async fund(to, units, request) {
      const { txHash } = await treasury.fund(to, units, request);
      if (lossyFailure === "timeout") throw new PaymentPendingError(txHash);
      throw new Error("socket hang up");
    },
  };
  wallets = new AgentWallets({
    pool: db.pool,
    keystore,
    ledger,
    fundingSource: async (accountId) => (accountId === lossyAccount ? lossy : treasury),
  });
  server = createGatewayServer({
    pool: db.pool,
    liveFeed: false,
    gateway: { wallets, keystore, secretBox: new SecretBox(randomBytes(32)) },
  });
  baseUrl = `http://127.0.0.1:${await server.listen(0)}`;
  apiKey = (await issueApiKey(db.pool, await createAccount(db.pool, "wallet races"))).apiKey;
  lossyAccount = await createAccount(db.pool, "lossy funding source");
  lossyKey = (await issueApiKey(db.pool, lossyAccount)).apiKey;
});

afterAll(async () => {
  await server?.close();
  await localnet?.stop();
  await db?.drop();
});

function post(path: string, body: unknown, idem?: string, key = apiKey): Promise<Answer> {
  return restCall(baseUrl, "POST", path, { key, body, idem });
}

function get(path: string, key = apiKey): Promise<Answer> {
  return restCall(baseUrl, "GET", path, { key });
}

/** Polls `check` until it returns a value (not undefined), up to `ms` (below the test timeout, so a stuck operation is named). */
async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  return (await pollUntil(check, { timeoutMs: ms, intervalMs: 100, what })) as T;
}

interface OperationRow {
  id: string;
  status: string;
  signature: string | null;
  amount_units: string;
}

async function operations(agentId: string, kind: "fund" | "withdraw"): Promise<OperationRow[]> {
  const { rows } = await db.pool.query<OperationRow>(
    "SELECT id::text, status, signature, amount_units::text FROM wallet_operations WHERE agent_id = $1 AND kind = $2 ORDER BY id",
    [await agentKey(db.pool, agentId), kind],
  );
  return rows;
}

type Plan = { readonly idem: string | undefined }[];

/** 50 requests: 20 keyless, 20 with their own key, and 2 keys sent 5 times each, shuffled. */
function plan(): Plan {
  const shared = [randomUUID(), randomUUID()];
  const requests: Plan = [
    ...Array.from({ length: 20 }, () => ({ idem: undefined })),
    ...Array.from({ length: 20 }, () => ({ idem: randomUUID() })),
    ...Array.from({ length: 10 }, (_, i) => ({ idem: shared[i % 2] })),
  ];
  return requests
    .map((request) => ({ request, order: Math.random() }))
    .sort((a, b) => a.order - b.order)
    .map(({ request }) => request);
}

/**
 * Sends the plan concurrently, then drives every request to its final answer the way a client
 * would: a keyed 202 or 409 is retried with its key, a keyless 202 is read back by its operation
 * id (GET .../wallet/operations/{id}, which asks the chain about a pending one). Returns the final answer of each request.
 */
async function race(path: string, body: unknown, requests: Plan): Promise<{ first: Answer[]; final: Answer[] }> {
  const first = await Promise.all(requests.map(({ idem }) => post(path, body, idem)));
  const final: Answer[] = [];
  for (const [i, answer] of first.entries()) {
    const { idem } = requests[i]!;
    if (answer.status !== 202 && answer.status !== 409) {
      final.push(answer);
    } else if (idem !== undefined) {
      final.push(
        await until(`the final answer under key ${idem}`, async () => {
          const retried = await post(path, body, idem);
          return retried.status === 202 || retried.status === 409 ? undefined : retried;
        }),
      );
    } else {
      // Keyless: the operation is read back by the id the 202 named.
      const operationPath = `${path.replace(/\/(fund|withdraw)$/, "/operations/")}${answer.body.operationId}`;
      final.push(
        await until(`operation ${answer.body.operationId} to resolve`, async () => {
          const read = await get(operationPath);
          return read.status === 200 && read.body.status === "pending" ? undefined : read;
        }),
      );
    }
  }
  return { first, final };
}

/** Every answer's invariants, and the set of operations the answers acknowledge. */
function acknowledged(requests: Plan, first: Answer[], final: Answer[]): Set<string> {
  for (const answer of first) {
    expect([200, 202, 409], JSON.stringify(answer.body)).toContain(answer.status);
    if (answer.status === 409) expect(answer.body.code).toBe("IDEMPOTENCY_IN_PROGRESS");
    // A pending answer names its operation: it can be followed up.
    if (answer.status === 202) expect(answer.body.operationId).toMatch(/^[0-9]+$/);
  }
  for (const answer of final) {
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.status).toBe("confirmed");
  }
  // Every request of one key is answered with one operation.
  const byKey = new Map<string, Set<string>>();
  for (const [i, { idem }] of requests.entries()) {
    if (idem === undefined) continue;
    byKey.set(idem, (byKey.get(idem) ?? new Set()).add(final[i]!.body.operationId));
  }
  for (const ids of byKey.values()) expect(ids.size).toBe(1);
  const ids = new Set(final.map((answer) => answer.body.operationId as string));
  // 20 keyless + 20 own keys + 2 shared keys.
  expect(ids.size).toBe(42);
  return ids;
}

async function expectOnChain(signatures: string[]): Promise<void> {
  const statuses = (await ledger.connection.getSignatureStatuses(signatures, { searchTransactionHistory: true })).value;
  for (const [i, status] of statuses.entries()) {
    expect(status, signatures[i]).not.toBeNull();
    expect(status!.err, signatures[i]).toBeNull();
  }
}

describe("concurrent wallet operations: the chain, the rows and the answers agree", () => {
  const amount = { usdc: 0.25 };
  const amountUnits = USDC / 4n;
  const withdrawal = { usdc: 0.2 };
  const withdrawalUnits = USDC / 5n;
  const destination = Keypair.generate().publicKey;

  it("50 concurrent fundings of one amount (keyless, own keys, shared keys): no 5xx, each acknowledged operation moved once", async () => {
    const created = await post("/v1/agents", { agentId: "racer" });
    expect(created.status).toBe(201);
    const agentAddress = new PublicKey(created.body.address);
    const treasuryBefore = BigInt((await ledger.connection.getTokenAccountBalance(localnet.info.treasuryToken, "confirmed")).value.amount);

    const requests = plan();
    const { first, final } = await race("/v1/agents/racer/wallet/fund", amount, requests);
    const ids = acknowledged(requests, first, final);

    const rows = await operations("racer", "fund");
    expect(rows.map((row) => row.id).sort()).toEqual([...ids].sort());
    expect(rows.every((row) => row.status === "confirmed" && row.amount_units === amountUnits.toString())).toBe(true);
    const signatures = rows.map((row) => row.signature!);
    expect(new Set(signatures).size).toBe(42);
    for (const answer of final) expect(answer.body.txHash).toBe(rows.find((row) => row.id === answer.body.operationId)!.signature);
    await expectOnChain(signatures);

    const moved = 42n * amountUnits;
    expect(await tokenBalanceUnits(ledger, agentAddress)).toBe(moved);
    const treasuryAfter = BigInt((await ledger.connection.getTokenAccountBalance(localnet.info.treasuryToken, "confirmed")).value.amount);
    expect(treasuryBefore - treasuryAfter).toBe(moved);
  });

  it("50 concurrent withdrawals of one amount to one address: no 5xx, each acknowledged operation moved once", async () => {
    // An agent of its own, funded once, so this race does not depend on the one above.
    const created = await post("/v1/agents", { agentId: "racer-out" });
    expect(created.status).toBe(201);
    const agentAddress = new PublicKey(created.body.address);
    expect((await post("/v1/agents/racer-out/wallet/fund", { usdc: 10.5 }, randomUUID())).status).toBe(200);
    const balanceBefore = await tokenBalanceUnits(ledger, agentAddress);
    expect(balanceBefore).toBe(10_500_000n);
    const requests = plan();
    const { first, final } = await race("/v1/agents/racer-out/wallet/withdraw", { to: destination.toBase58(), ...withdrawal }, requests);
    const ids = acknowledged(requests, first, final);

    const rows = await operations("racer-out", "withdraw");
    expect(rows.map((row) => row.id).sort()).toEqual([...ids].sort());
    expect(rows.every((row) => row.status === "confirmed" && row.amount_units === withdrawalUnits.toString())).toBe(true);
    const signatures = rows.map((row) => row.signature!);
    expect(new Set(signatures).size).toBe(42);
    await expectOnChain(signatures);

    const moved = 42n * withdrawalUnits;
    expect(await tokenBalanceUnits(ledger, destination)).toBe(moved);
    expect(await tokenBalanceUnits(ledger, agentAddress)).toBe(balanceBefore - moved);
    const pending = await db.pool.query("SELECT count(*)::int AS n FROM wallet_operations WHERE status = 'pending'");
    expect(pending.rows[0].n).toBe(0);
  });
});

describe("each operation's transaction is its own", () => {
  it("two operations of the same amount signed with the same blockhash have different signatures, and both land", async () => {
    const owner = Keypair.generate();
    const { address } = await createAgentWallet(db.pool, keystoreFromEnv({ WALLET_ENCRYPTION_KEY: generateWalletEncryptionKey() }), {
      accountId: await createAccount(db.pool, "same blockhash"),
      agentId: "same-blockhash",
    });
    const agent = new PublicKey(address);
    const blockhash = await recentBlockhash(ledger);
    const treasury = { ...ledger, authority: localnet.keypairs.treasury };
    const fundings = ["901", "902"].map((id) =>
      signTransaction(
        treasury,
        treasuryFundingTransaction(ledger, localnet.keypairs.treasury.publicKey, localnet.info.treasuryToken, agent, USDC, id),
        blockhash,
        [],
      ),
    );
    expect(fundings[0]!.signature).not.toBe(fundings[1]!.signature);
    // Same operation, same blockhash: the same bytes (the memo is what tells two operations apart).
    const again = signTransaction(
      treasury,
      treasuryFundingTransaction(ledger, localnet.keypairs.treasury.publicKey, localnet.info.treasuryToken, agent, USDC, "901"),
      blockhash,
      [],
    );
    expect(again.signature).toBe(fundings[0]!.signature);

    const withdrawals = ["903", "904"].map((id) =>
      signTransaction(ledger, withdrawalTransaction(ledger, owner.publicKey, agent, USDC, id), blockhash, [owner]),
    );
    expect(withdrawals[0]!.signature).not.toBe(withdrawals[1]!.signature);
    expect(withdrawalTransaction(ledger, owner.publicKey, agent, USDC, "903").instructions.at(-1)!.programId.equals(MEMO_PROGRAM_ID)).toBe(
      true,
    );

    // The ledger runs the memo program: both fundings land and the wallet holds both.
    for (const signed of fundings) await ledger.connection.sendRawTransaction(Buffer.from(signed.wire, "base64"));
    await until("both fundings to land", async () => {
      const statuses = (await ledger.connection.getSignatureStatuses(fundings.map((signed) => signed.signature))).value;
      return statuses.every((status) => status?.confirmationStatus === "confirmed" || status?.confirmationStatus === "finalized")
        ? statuses
        : undefined;
    }).then((statuses) => expect(statuses.map((status) => status!.err)).toEqual([null, null]));
    expect(await tokenBalanceUnits(ledger, agent)).toBe(2n * USDC);
  });
});

describe("an outcome the gateway did not learn is pending, never failed", () => {
  async function lossyPost(path: string, body: unknown, idem?: string): Promise<Answer> {
    return post(path, body, idem, lossyKey);
  }

  async function keyRow(idem: string): Promise<{ status: string; response_status: number | null }> {
    const { rows } = await db.pool.query("SELECT status, response_status FROM idempotency_keys WHERE key = $1", [idem]);
    return rows[0];
  }

  it("a funding whose answer timed out is 202 pending with its operation; the key stays open and a retry answers confirmed", async () => {
    expect((await lossyPost("/v1/agents", { agentId: "lossy-1" })).status).toBe(201);
    lossyFailure = "timeout";
    const idem = randomUUID();
    const first = await lossyPost("/v1/agents/lossy-1/wallet/fund", { usdc: 1.5 }, idem);
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ kind: "fund", status: "pending" });
    expect(first.body.operationId).toMatch(/^[0-9]+$/);
    expect(await keyRow(idem)).toEqual({ status: "in_progress", response_status: null });

    const retried = await lossyPost("/v1/agents/lossy-1/wallet/fund", { usdc: 1.5 }, idem);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ operationId: first.body.operationId, txHash: first.body.txHash, status: "confirmed" });
    expect(await keyRow(idem)).toEqual({ status: "completed", response_status: 200 });
    expect(await tokenBalanceUnits(ledger, await wallets.address(await agentKey(db.pool, "lossy-1")))).toBe(1_500_000n);
  });

  it("a funding whose connection dropped after sending is 202 pending (not PAYMENT_FAILED) and the reconciler confirms it", async () => {
    expect((await lossyPost("/v1/agents", { agentId: "lossy-2" })).status).toBe(201);
    lossyFailure = "socket";
    const idem = randomUUID();
    const keyed = await lossyPost("/v1/agents/lossy-2/wallet/fund", { usdc: 0.5 }, idem);
    const keyless = await lossyPost("/v1/agents/lossy-2/wallet/fund", { usdc: 0.5 });
    for (const answer of [keyed, keyless]) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      expect(answer.body.status).toBe("pending");
    }
    expect(await keyRow(idem)).toEqual({ status: "in_progress", response_status: null });

    // The keyless caller reads its operation back: the chain is asked, the row resolved.
    const read = await get(`/v1/agents/lossy-2/wallet/operations/${keyless.body.operationId}`, lossyKey);
    expect(read).toMatchObject({
      status: 200,
      body: { operationId: keyless.body.operationId, kind: "fund", status: "confirmed", txHash: keyless.body.txHash, error: null },
    });
    await wallets.reconcilePendingOperations();
    const rows = await operations("lossy-2", "fund");
    expect(rows.map((row) => [row.id, row.status, row.signature])).toEqual([
      [keyed.body.operationId, "confirmed", keyed.body.txHash],
      [keyless.body.operationId, "confirmed", keyless.body.txHash],
    ]);
    const retried = await lossyPost("/v1/agents/lossy-2/wallet/fund", { usdc: 0.5 }, idem);
    expect(retried).toMatchObject({ status: 200, body: { operationId: keyed.body.operationId, status: "confirmed" } });
    expect(await tokenBalanceUnits(ledger, await wallets.address(await agentKey(db.pool, "lossy-2")))).toBe(1_000_000n);
  });

  it("reading an operation: another agent's or an unknown id is 404, a malformed id 400", async () => {
    // Agents of its own, and an operation whose answer was lost, then confirmed by the reconciler.
    for (const agentId of ["lossy-read", "lossy-other"]) expect((await lossyPost("/v1/agents", { agentId })).status).toBe(201);
    lossyFailure = "socket";
    expect((await lossyPost("/v1/agents/lossy-read/wallet/fund", { usdc: 0.5 })).status).toBe(202);
    await wallets.reconcilePendingOperations();
    const [operation] = await operations("lossy-read", "fund");
    expect((await get(`/v1/agents/lossy-read/wallet/operations/${operation!.id}`, lossyKey)).status).toBe(200);
    expect((await get(`/v1/agents/lossy-other/wallet/operations/${operation!.id}`, lossyKey)).body.code).toBe("NOT_FOUND");
    expect((await get("/v1/agents/lossy-read/wallet/operations/999999999", lossyKey)).status).toBe(404);
    // The agent is in another account: not found for this key.
    expect((await get(`/v1/agents/lossy-read/wallet/operations/${operation!.id}`)).status).toBe(404);
    for (const bad of ["0", "-1", "1.5", "abc", "99999999999999999999"]) {
      const answer = await get(`/v1/agents/lossy-read/wallet/operations/${bad}`, lossyKey);
      expect(answer.status, bad).toBe(400);
      expect(answer.body.code, bad).toBe("BAD_USER_INPUT");
    }

    // The SDK's follow-up of a pending answer reads the same resource.
    const sdk = new Client({ agentId: "lossy-read", apiKey: lossyKey, baseUrl });
    expect(await sdk.wallet.operation(operation!.id)).toMatchObject({
      operationId: operation!.id,
      status: "confirmed",
      txHash: operation!.signature,
    });
    await expect(sdk.wallet.operation("1; drop")).rejects.toThrow(TypeError);
  });

  /**
   * The same ledger behind an RPC whose signature lookups fail (and, with `dropSends`, whose
   * sends fail as a reset connection would): the gateway cannot learn the outcome.
   */
  function unreachableRpc(dropSends: boolean): AgentWallets {
    const connection = Object.create(ledger.connection) as Connection;
    connection.getSignatureStatuses = async () => {
      throw new Error("RPC unavailable");
    };
    if (dropSends) {
      connection.sendRawTransaction = async () => {
        throw new Error("socket hang up");
      };
    }
    return new AgentWallets({
      pool: db.pool,
      keystore,
      ledger: { ...ledger, connection },
      fundingSource: async () => LocalTreasuryFundingSource.fromLocalnet(ledger, localnet),
    });
  }

  async function fundedWallet(agentId: string): Promise<PublicKey> {
    // An account of its own: its funding source is the plain treasury.
    const { address } = await createAgentWallet(db.pool, keystore, { accountId: await createAccount(db.pool, agentId), agentId });
    expect((await wallets.fund(agentId, USDC)).status).toBe("confirmed");
    return new PublicKey(address);
  }

  it("a withdrawal sent whose outcome could not be looked up is pending, and confirmed once the chain answers", async () => {
    const agent = await fundedWallet("unsure-out");
    const destination = Keypair.generate().publicKey;
    const answer = await unreachableRpc(false).withdraw("unsure-out", destination.toBase58(), 300_000n);
    expect(answer).toMatchObject({ status: "pending", replayed: false });
    expect(answer.operationId).toMatch(/^[0-9]+$/);
    const read = await until("the withdrawal to resolve", async () => {
      const operation = await wallets.operation("unsure-out", answer.operationId);
      return operation?.status === "pending" ? undefined : operation;
    });
    expect(read).toMatchObject({ status: "confirmed", txHash: answer.txHash, kind: "withdraw", amountUnits: 300_000n, error: null });
    expect(await tokenBalanceUnits(ledger, destination)).toBe(300_000n);
    expect(await tokenBalanceUnits(ledger, agent)).toBe(USDC - 300_000n);
  });

  it("a withdrawal that never reached the ledger is pending until its blockhash expired, then failed, and nothing moved", async () => {
    const agent = await fundedWallet("lost-out");
    const destination = Keypair.generate().publicKey;
    const answer = await unreachableRpc(true).withdraw("lost-out", destination.toBase58(), 300_000n);
    expect(answer).toMatchObject({ status: "pending", replayed: false });
    const { rows } = await db.pool.query(
      "SELECT status, signature, last_valid_block_height::int AS height FROM wallet_operations WHERE id = $1",
      [answer.operationId],
    );
    expect(rows[0]).toMatchObject({ status: "pending", signature: answer.txHash });
    const read = await until("the withdrawal's blockhash to expire", async () => {
      await wallets.reconcilePendingOperations();
      const operation = await wallets.operation("lost-out", answer.operationId);
      return operation?.status === "pending" ? undefined : operation;
    });
    expect(read).toMatchObject({ status: "failed", error: "expired" });
    expect(await ledger.connection.getBlockHeight("finalized")).toBeGreaterThan(rows[0].height);
    expect(await tokenBalanceUnits(ledger, destination)).toBe(0n);
    expect(await tokenBalanceUnits(ledger, agent)).toBe(USDC);
  });
});
