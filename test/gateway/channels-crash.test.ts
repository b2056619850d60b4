/**
 * A gateway process working on a channel is killed (SIGKILL): once while signing vouchers (at a
 * random moment after some were answered), once between a settlement's durable intent and its
 * confirmation. A fresh gateway (new process state, same database and ledger) then finishes the
 * work, and nothing is lost or settled twice: every voucher answered is a stored charge, the
 * sequence has no gap, every accepted charge is settled exactly once on chain, and the close
 * refunds exactly deposit − settled.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChannelSessions } from "../../api/gateway/channels/index.js";
import {
  decodeChannelAccount,
  decodeTransactionEvents,
  eventsNamed,
  PAYMENT_LEDGER_PROGRAM_ID,
} from "../../programs/payment_ledger/ts/index.js";
import { pollUntil } from "../support/poll.js";
import { type ChannelGateway, expectAgreement, newPayee, SERVICE, startChannelGateway, USDC } from "./support/channel-gateway.js";

const REPO = resolve(fileURLToPath(import.meta.url), "..", "..", "..");
const WORKER_APPLICATION = "channels-crash-worker";

/** The gateway process: signs vouchers in three lanes, or presents one voucher for settlement. */
const WORKER = `
import { ChannelSessions } from "./api/gateway/channels/index.js";
import { settlementLedgerFromEnv } from "./api/gateway/chain/index.js";
import { AgentWallets, keystoreFromEnv } from "./api/gateway/wallets/index.js";
import { createPool } from "./indexer/db/database.js";
const env = process.env;
const ledger = await settlementLedgerFromEnv(env);
const pool = createPool(env.DATABASE_URL);
const fundingSource = { fund: async () => { throw new Error("no funding in the worker"); } };
const wallets = new AgentWallets({ pool, keystore: keystoreFromEnv(env), ledger, fundingSource });
const channels = new ChannelSessions({ pool, ledger, wallets });
if (env.MODE === "sign") {
  let n = 0;
  async function lane() {
    for (;;) {
      n += 1;
      const r = await channels.sign({ channel: env.CHANNEL, accountId: env.ACCOUNT_ID, endpoint: "${SERVICE}/v1/crash", amountUnits: BigInt(1000 + n) }, new Date());
      process.stdout.write("signed " + r.charge.sequence + " " + r.charge.cumulativeUnits + " " + r.charge.signature + "\\n");
    }
  }
  await Promise.all([lane(), lane(), lane()]);
} else if (env.MODE === "open") {
  const agent = (await pool.query("SELECT * FROM agents WHERE agent_id = $1", [env.AGENT_ID])).rows[0];
  await channels.open({ agent, payee: env.PAYEE, serviceOrigin: "${SERVICE}", depositUnits: 1000000n, protocol: "mpp", expiresInSeconds: 3600, withdrawDelaySeconds: 1, parentTxHash: null, reference: null }, new Date());
  process.stdout.write("opened\\n");
  await new Promise(() => undefined);
} else {
  process.stdout.write("presenting\\n");
  await channels.present(JSON.parse(env.PRESENTATION, (k, v) => (typeof v === "string" && /^n[0-9]+$/.test(v) ? BigInt(v.slice(1)) : v)));
  process.stdout.write("presented\\n");
  await new Promise(() => undefined);
}
`;

let gateway: ChannelGateway;
let worker: ChildProcess | undefined;

beforeAll(async () => {
  gateway = await startChannelGateway();
});

afterAll(async () => {
  worker?.kill("SIGKILL");
  await gateway?.stop();
});

function withApplicationName(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set("application_name", name);
  return parsed.toString();
}

async function workerSessionsGone(): Promise<void> {
  await pollUntil(
    async () => {
      const { rows } = await gateway.db.pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1",
        [WORKER_APPLICATION],
      );
      return rows[0]!.n === 0;
    },
    { timeoutMs: 20_000, intervalMs: 50, what: () => "the killed worker's sessions to end" },
  );
}

/** Runs the worker; `onLine` answers true when it is time to kill it (SIGKILL). Resolves with its output lines. */
function runAndKill(
  env: Record<string, string>,
  onLine: (line: string, lines: string[]) => boolean,
  poll?: () => Promise<boolean>,
): Promise<string[]> {
  return new Promise((resolveRun, rejectRun) => {
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", WORKER], {
      cwd: REPO,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        SOLANA_RPC_URL: gateway.localnet.rpcUrl,
        SETTLEMENT_MINT: gateway.localnet.info.mint.toBase58(),
        PROGRAM_ID: gateway.localnet.info.programId.toBase58(),
        LEDGER_AUTHORITY_KEYPAIR: join(gateway.localnet.ledgerDir, "authority.json"),
        DATABASE_URL: withApplicationName(gateway.db.url, WORKER_APPLICATION),
        WALLET_ENCRYPTION_KEY: gateway.walletKey,
        ...env,
      },
    });
    worker = child;
    const lines: string[] = [];
    let stderr = "";
    let killing = false;
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4_000);
    });
    const kill = () => {
      if (killing) return;
      killing = true;
      child.kill("SIGKILL");
    };
    const timer = setTimeout(() => {
      kill();
      rejectRun(new Error(`the worker did not reach its kill point in time\n${stderr}`));
    }, 60_000);
    createInterface({ input: child.stdout! }).on("line", (line) => {
      lines.push(line);
      if (onLine(line, lines)) kill();
    });
    if (poll !== undefined) {
      const tick = async (): Promise<void> => {
        if (killing) return;
        if (await poll().catch(() => false)) kill();
        else setTimeout(() => void tick(), 5);
      };
      void tick();
    }
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (signal === "SIGKILL" && killing) resolveRun(lines);
      else rejectRun(new Error(`worker exited on its own (code ${code}, signal ${signal})\n${stderr}`));
    });
  });
}

async function openChannel(deposit: string) {
  const agentId = await gateway.newAgent();
  const opened = await gateway.call(
    "POST",
    `/v1/agents/${agentId}/channels`,
    { payee: newPayee(), serviceOrigin: SERVICE, deposit, protocol: "mpp", withdrawDelaySeconds: 1 },
    { idem: randomUUID() },
  );
  expect(opened.status).toBe(201);
  return opened.body as { channel: string; payer: string; payee: string };
}

async function chargeRows(channel: string) {
  const { rows } = await gateway.db.pool.query<{
    sequence: string;
    cumulative: string;
    amount: string;
    payment_id: string;
    endpoint: string;
    signature: string;
  }>(
    "SELECT sequence, cumulative::text, amount::text, payment_id, endpoint, signature FROM channel_charges WHERE channel = $1 ORDER BY sequence",
    [channel],
  );
  return rows;
}

function presentationOf(rows: Awaited<ReturnType<typeof chargeRows>>) {
  const last = rows[rows.length - 1]!;
  return {
    cumulative: last.cumulative,
    sequence: last.sequence,
    signature: last.signature,
    charges: rows.map((row) => ({ sequence: row.sequence, paymentId: row.payment_id, amountUnits: row.amount, endpoint: row.endpoint })),
  };
}

/** Payment ids recorded on chain by the channel's confirmed settlements; each must appear once. */
async function paymentIdsOnChain(channel: string): Promise<bigint[]> {
  const { rows } = await gateway.db.pool.query<{ signature: string }>(
    "SELECT signature FROM channel_settlement_sends WHERE channel = $1 AND status = 'confirmed' ORDER BY to_sequence",
    [channel],
  );
  const ids: bigint[] = [];
  for (const { signature } of rows) {
    const tx = await gateway.ledger.connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
    for (const event of eventsNamed(decodeTransactionEvents(tx!, PAYMENT_LEDGER_PROGRAM_ID), "PaymentRecorded")) ids.push(event.paymentId);
  }
  return ids;
}

describe("channel sessions across a gateway crash", () => {
  it("killed while signing vouchers: every answered voucher is stored, the sequence has no gap, and all of it settles once", async () => {
    const opened = await openChannel("5");
    // A random moment after a few vouchers were answered (three lanes keep others in flight).
    const killAfter = 10 + Math.floor(Math.random() * 20);
    const lines = await runAndKill(
      { MODE: "sign", CHANNEL: opened.channel, ACCOUNT_ID: gateway.accountId },
      (_line, all) => all.length >= killAfter,
    );
    await workerSessionsGone();
    const rows = await chargeRows(opened.channel);
    expect(rows.map((row) => row.sequence)).toEqual(rows.map((_, i) => String(i + 1)));
    for (const line of lines.filter((l) => l.startsWith("signed "))) {
      const [, sequence, cumulative, signature] = line.split(" ");
      expect(rows[Number(sequence) - 1]).toMatchObject({ cumulative, signature });
    }
    const sum = rows.reduce((total, row) => total + BigInt(row.amount), 0n);
    const session = await gateway.call("GET", `/v1/channels/${opened.channel}`);
    expect(session.body).toMatchObject({ signedSequence: String(rows.length), signedCumulativeUnits: sum.toString() });

    // A fresh gateway settles everything the payee presents, then closes.
    const fresh = new ChannelSessions({ pool: gateway.db.pool, ledger: gateway.ledger, wallets: gateway.wallets });
    const presented = presentationOf(rows);
    const settled = await gateway.call("POST", `/v1/channels/${opened.channel}/settlements`, presented, { key: gateway.payeeKey });
    expect(settled.body).toMatchObject({ settledCumulativeUnits: sum.toString(), settledSequence: String(rows.length) });
    expect(await paymentIdsOnChain(opened.channel)).toEqual(rows.map((row) => BigInt(row.payment_id)));
    const closed = await fresh.close(opened.channel, gateway.accountId);
    expect(closed.refundedUnits).toBe(5n * USDC - sum);
    await expectAgreement(gateway, opened.channel, opened.payer, 10n * USDC);
  });

  it("killed between a settlement's durable intent and its confirmation: the restarted gateway settles it once and loses nothing", async () => {
    const opened = await openChannel("2");
    for (let i = 0; i < 30; i += 1) {
      const answer = await gateway.call("POST", `/v1/channels/${opened.channel}/vouchers`, {
        endpoint: `${SERVICE}/v1/item`,
        amount: ((2_000 + i) / 1e6).toFixed(6),
      });
      expect(answer.status).toBe(200);
    }
    const rows = await chargeRows(opened.channel);
    const presentation = presentationOf(rows);
    // BigInts travel as "n<digits>" to the worker.
    const encoded = JSON.stringify({
      channel: opened.channel,
      cumulativeUnits: `n${presentation.cumulative}`,
      sequence: `n${presentation.sequence}`,
      signature: presentation.signature,
      charges: presentation.charges.map((c) => ({
        sequence: `n${c.sequence}`,
        paymentId: `n${c.paymentId}`,
        amountUnits: `n${c.amountUnits}`,
        endpoint: c.endpoint,
      })),
    });
    await runAndKill(
      { MODE: "present", PRESENTATION: encoded },
      () => false,
      async () => {
        const { rows: pending } = await gateway.db.pool.query(
          "SELECT 1 FROM channel_settlement_sends WHERE channel = $1 AND status = 'pending'",
          [opened.channel],
        );
        return pending.length > 0;
      },
    );
    await workerSessionsGone();
    const left = await gateway.db.pool.query<{ status: string }>("SELECT status FROM channel_settlement_sends WHERE channel = $1", [
      opened.channel,
    ]);
    expect(left.rows.map((row) => row.status)).toContain("pending");

    // The restarted gateway's loop resolves the pending settlement and settles the rest.
    const fresh = new ChannelSessions({ pool: gateway.db.pool, ledger: gateway.ledger, wallets: gateway.wallets });
    await pollUntil(
      async () => {
        await fresh.runPass();
        const { rows: s } = await gateway.db.pool.query<{ settled: string }>(
          "SELECT settled_sequence::text AS settled FROM channel_sessions WHERE channel = $1",
          [opened.channel],
        );
        return s[0]!.settled === "30";
      },
      { timeoutMs: 60_000, intervalMs: 200, what: () => "the restarted gateway to settle all 30 charges" },
    );
    const state = decodeChannelAccount((await gateway.ledger.connection.getAccountInfo(new PublicKey(opened.channel), "confirmed"))!.data);
    expect(state.settled.sequence).toBe(30n);
    expect(state.settled.cumulativeUnits.toString()).toBe(presentation.cumulative);
    expect(await paymentIdsOnChain(opened.channel)).toEqual(rows.map((row) => BigInt(row.payment_id)));
    const settlements = await gateway.db.pool.query<{ from_sequence: string; to_sequence: string }>(
      "SELECT from_sequence, to_sequence FROM channel_settlement_sends WHERE channel = $1 AND status = 'confirmed' ORDER BY to_sequence",
      [opened.channel],
    );
    // Confirmed settlements tile 1..30 without overlap.
    let next = 1n;
    for (const row of settlements.rows) {
      expect(BigInt(row.from_sequence)).toBe(next);
      next = BigInt(row.to_sequence) + 1n;
    }
    expect(next).toBe(31n);
    const closed = await fresh.close(opened.channel, gateway.accountId);
    expect(closed.refundedUnits).toBe(2n * USDC - BigInt(presentation.cumulative));
    await expectAgreement(gateway, opened.channel, opened.payer, 10n * USDC);
  });
  it("killed while opening: the restarted gateway decides the session from the chain, and the reservation follows", async () => {
    const agentId = await gateway.newAgent();
    const { rows: agents } = await gateway.db.pool.query<{ agent_id: string }>("SELECT agent_id FROM agents WHERE public_id = $1", [
      agentId,
    ]);
    const internal = agents[0]!.agent_id;
    const payee = newPayee();
    await runAndKill(
      { MODE: "open", AGENT_ID: internal, PAYEE: payee },
      () => false,
      async () => {
        const { rows } = await gateway.db.pool.query("SELECT 1 FROM channel_sessions WHERE agent_id = $1", [internal]);
        return rows.length > 0;
      },
    );
    await workerSessionsGone();
    const { rows: before } = await gateway.db.pool.query<{ channel: string; status: string }>(
      "SELECT channel, status FROM channel_sessions WHERE agent_id = $1",
      [internal],
    );
    expect(before).toHaveLength(1);
    const channel = before[0]!.channel;
    const fresh = new ChannelSessions({ pool: gateway.db.pool, ledger: gateway.ledger, wallets: gateway.wallets });
    let status = before[0]!.status;
    await pollUntil(
      async () => {
        await fresh.runPass();
        status = (await gateway.db.pool.query("SELECT status FROM channel_sessions WHERE channel = $1", [channel])).rows[0].status;
        return status !== "opening";
      },
      { timeoutMs: 90_000, intervalMs: 300, what: () => `the open to be decided (still ${status})` },
    );
    const account = await gateway.ledger.connection.getAccountInfo(new PublicKey(channel), "confirmed");
    const { rows: reservation } = await gateway.db.pool.query(
      "SELECT status, amount_units::text AS amount FROM spend_reservations WHERE payment_ref = $1",
      [`channel:${channel}`],
    );
    if (status === "open") {
      expect(decodeChannelAccount(account!.data).depositUnits).toBe(USDC);
      expect(reservation).toEqual([{ status: "reserved", amount: String(USDC) }]);
      // The session works: a charge is signed on it, and it closes with everything refunded.
      const signed = await fresh.sign({ channel, accountId: gateway.accountId, endpoint: `${SERVICE}/v1/x`, amountUnits: 5n }, new Date());
      expect(signed.outcome).toBe("signed");
      expect((await fresh.close(channel, gateway.accountId)).refundedUnits).toBe(USDC);
      await expectAgreement(gateway, channel, (await gateway.wallets.address(internal)).toBase58(), 10n * USDC);
    } else {
      expect(status).toBe("failed");
      expect(account).toBeNull();
      expect(reservation).toEqual([{ status: "released", amount: String(USDC) }]);
    }
  });
});
