/**
 * The gateway's hot paths under load, on the whole system (`startSystem`: the local ledger, a
 * fresh migrated database, the indexer, the API with REST /v1, the reconciler, the dispatcher):
 *
 *   a. policy check + reservation at 200 concurrent callers, against a SERIALIZABLE baseline
 *      without the per-agent lock (same run, interleaved), for one hot agent and for 200 agents;
 *   b. an x402 payment end to end on loopback, and the gateway's own share of it;
 *   c. a paid MPP request on a reused session;
 *   d. a paid request on an open channel session next to the same request unpaid, and
 *      the channel's settlement cost per charge on chain next to record_payment's.
 *
 * Prints the figures, the goals and whether each is met. Exit code 1 only for a wrong answer
 * (a budget overspent, a payment that did not go through), never for a missed goal.
 *
 *   npm run bench:gateway [-- --callers 200 --reservations 5000 --pool 4 --x402 200 --mpp 200 --channel 200 --warmup 10 --sections abcd]
 */
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { pino } from "pino";
import { startSystem } from "../../scripts/system.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { goalLine, row, TABLE_HEADER } from "./latency.js";
import { runChannelSession } from "./channel-session.js";
import { runMppSession } from "./mpp-session.js";
import { benchPool, type ReservationRun, runReservations, type Shape, type Variant } from "./reservations.js";
import { runX402 } from "./x402-pay.js";

const { values: flags } = parseArgs({
  options: {
    callers: { type: "string", default: "200" },
    reservations: { type: "string", default: "5000" },
    pool: { type: "string", default: "4" },
    x402: { type: "string", default: "200" },
    mpp: { type: "string", default: "200" },
    channel: { type: "string", default: "200" },
    sections: { type: "string", default: "abcd" },
    warmup: { type: "string", default: "10" },
  },
});
const CALLERS = Number(flags.callers);
const RESERVATIONS = Number(flags.reservations);
const POOL = Number(flags.pool);
const X402_PAYMENTS = Number(flags.x402);
const MPP_REQUESTS = Number(flags.mpp);
const CHANNEL_REQUESTS = Number(flags.channel);
const WARMUP = Number(flags.warmup);
const SECTIONS = new Set(flags.sections);
for (const [name, value] of Object.entries({
  callers: CALLERS,
  reservations: RESERVATIONS,
  pool: POOL,
  x402: X402_PAYMENTS,
  mpp: MPP_REQUESTS,
  channel: CHANNEL_REQUESTS,
})) {
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} must be a positive integer`);
}
if (!Number.isInteger(WARMUP) || WARMUP < 0) throw new Error("--warmup must be a non-negative integer");
if (RESERVATIONS < CALLERS * 6) throw new Error("--reservations must be at least 6 per caller (each spread agent has 5 refused)");

const GOAL_RESERVE_P99_MS = 5;
const GOAL_X402_P99_MS = 100;
const GOAL_MPP_P99_MS = 20;
const GOAL_CHANNEL_OVERHEAD_P99_MS = 2;

const load = (): string =>
  loadavg()
    .map((x) => x.toFixed(1))
    .join(" / ");

async function run(): Promise<void> {
  const db = await createFreshDatabase();
  const system = await startSystem({ databaseUrl: db.url, port: 0, allowPrivateNetworks: true, logger: pino({ level: "warn" }) });
  const problems: string[] = [];
  try {
    console.log(`gateway bench on ${availableParallelism()} cores, load average ${load()} (1/5/15 min)`);
    const customer = await system.createAccount("bench customer");
    const client = { gatewayUrl: system.apiUrl, apiKey: customer.apiKey };
    const serverKey = (await system.createAccount("bench paid API")).apiKey;

    const goals: string[] = [];
    if (SECTIONS.has("a")) {
      // a. Reservations. A small warm-up of each variant, then the measured runs, alternating the
      // variants so load from elsewhere on the machine falls on both alike.
      const pool = benchPool(db.url, POOL);
      const runs: ReservationRun[] = [];
      const uncontended: ReservationRun[] = [];
      try {
        const options = { databaseUrl: db.url, callers: CALLERS, reservations: RESERVATIONS, poolSize: POOL };
        const warm = { ...options, callers: Math.min(CALLERS, 50), reservations: Math.min(CALLERS, 50) * 6 };
        for (const variant of ["advisory lock", "serializable"] as const) await runReservations(pool, warm, variant, "spread");
        const order: [Variant, Shape][] = [
          ["advisory lock", "hot"],
          ["serializable", "hot"],
          ["serializable", "spread"],
          ["advisory lock", "spread"],
        ];
        for (const [variant, shape] of order) runs.push(await runReservations(pool, options, variant, shape));
        // The service time without contention: one caller, one agent, the same number of rows.
        const alone = { ...options, callers: 1, reservations: Math.min(RESERVATIONS, 1_000) };
        for (const variant of ["advisory lock", "serializable"] as const)
          uncontended.push(await runReservations(pool, alone, variant, "hot"));
      } finally {
        await pool.end();
      }
      console.log(
        `\na. policy check + reservation, ${CALLERS} concurrent callers, ${RESERVATIONS} reservations per run, pool of ${POOL} connections`,
      );
      console.log(
        "   txn = BEGIN → COMMIT on a connection in hand (lock waits, retries included); caller = incl. waiting for a pooled connection",
      );
      console.log(TABLE_HEADER);
      for (const r of runs) {
        const label = `${r.shape === "hot" ? "hot agent" : `${CALLERS} agents`}, ${r.variant}`;
        console.log(row(`${label}: txn`, r.txn));
        console.log(row(`${label}: caller`, r.caller));
      }
      for (const r of uncontended) console.log(row(`1 caller, 1 agent, ${r.variant}: txn`, r.txn));
      for (const r of [...runs, ...uncontended]) {
        console.log(
          `   ${(r === uncontended[0] || r === uncontended[1] ? "alone" : r.shape).padEnd(6)} ${r.variant.padEnd(13)}: ${r.accepted} accepted, ${r.refused} refused, ${r.retries} serialization retries, ` +
            `${(r.wall_ms / 1000).toFixed(1)} s, ${Math.round(((r.accepted + r.refused) * 1000) / r.wall_ms)} reservations/s`,
        );
        problems.push(...r.problems.map((p) => `reservations (${r.shape}, ${r.variant}): ${p}`));
      }

      for (const r of runs.filter((x) => x.variant === "advisory lock")) {
        goals.push(
          goalLine({
            label: `reservation, ${r.shape === "hot" ? "hot agent" : `${CALLERS} agents`} (txn)`,
            p99_ms: r.txn.p99,
            goal_ms: GOAL_RESERVE_P99_MS,
          }),
        );
      }
      for (const shape of ["hot", "spread"] as const) {
        const lock = runs.find((r) => r.shape === shape && r.variant === "advisory lock")!;
        const ssi = runs.find((r) => r.shape === shape && r.variant === "serializable")!;
        goals.push(
          `vs baseline (${shape}): serializable/lock p99 ${(ssi.txn.p99 / lock.txn.p99).toFixed(1)}x (txn), ` +
            `${(ssi.caller.p99 / lock.caller.p99).toFixed(1)}x (caller); wall ${(ssi.wall_ms / lock.wall_ms).toFixed(1)}x`,
        );
      }
    }

    if (SECTIONS.has("b")) {
      // b. x402 end to end.
      const x402 = await runX402(system, client, serverKey, X402_PAYMENTS, WARMUP);
      problems.push(...x402.problems);
      console.log(`\nb. x402 payment end to end on loopback, one at a time (${X402_PAYMENTS} payments after ${WARMUP} warm-up)`);
      console.log(TABLE_HEADER);
      console.log(row("402 → authorize → paid retry → 200 (end to end)", x402.endToEnd));
      console.log(row("  authorize route (REST, client-side round trip)", x402.authorize));
      console.log(row("  settle route (REST, as the paid API sees it)", x402.settleRoute));
      console.log(row("    the same without an Idempotency-Key (interleaved)", x402.settleRouteUnkeyed));
      console.log(row("  ledger: send + confirm (completeSettlement)", x402.ledger));
      console.log(row("  settlePayment in all (+ balance/blockhash reads, pending row)", x402.settlePayment));
      console.log(row("  gateway share: authorize + settle − ledger", x402.gatewayShare));
      console.log(row("complete route (after the answer)", x402.complete));

      goals.push(goalLine({ label: "x402 end to end", p99_ms: x402.endToEnd.p99, goal_ms: GOAL_X402_P99_MS }));
    }

    if (SECTIONS.has("c")) {
      // c. MPP on a reused session.
      const mpp = await runMppSession(system, client, MPP_REQUESTS, WARMUP, customer.accountId);
      problems.push(...mpp.problems);
      console.log(
        `\nc. MPP paid request on a reused session (${MPP_REQUESTS} requests after ${WARMUP} warm-up; negotiation took ${mpp.negotiate_ms.toFixed(1)} ms)`,
      );
      console.log(TABLE_HEADER);
      console.log(row("request with X-MPP-Session → 200 (charged on the ledger)", mpp.request));
      console.log(row("  ledger: send + confirm (completeSettlement)", mpp.ledger));
      console.log(row("  settlePayment in all (+ balance/blockhash reads, pending row)", mpp.settlePayment));
      console.log(row("  gateway share: request − ledger", mpp.gatewayShare));

      goals.push(goalLine({ label: "MPP session request", p99_ms: mpp.request.p99, goal_ms: GOAL_MPP_P99_MS }));
    }

    if (SECTIONS.has("d")) {
      // d. A channel session.
      const ch = await runChannelSession(system, client, serverKey, CHANNEL_REQUESTS, WARMUP, customer.accountId);
      problems.push(...ch.problems);
      const overhead = (paid: { p50: number; p99: number }, unpaid: { p50: number; p99: number }) =>
        `difference of percentiles: p50 ${(paid.p50 - unpaid.p50).toFixed(2)} ms, p99 ${(paid.p99 - unpaid.p99).toFixed(2)} ms`;
      console.log(
        `\nd. paid request on an open channel session, loopback (${CHANNEL_REQUESTS} requests after ${WARMUP} warm-up, each next to the same request unpaid)`,
      );
      console.log(TABLE_HEADER);
      console.log(row("unpaid request (same server, no middleware)", ch.unpaidFile));
      console.log(row("voucher → payee check + file journal (fdatasync) → 200", ch.paidFile));
      console.log(`   ${overhead(ch.paidFile, ch.unpaidFile)}; ${ch.journalSyncs} fdatasyncs`);
      console.log(row("   overhead per pair (paid − unpaid), file journal", ch.overheadFile));
      console.log(row("unpaid request (memory-journal run)", ch.unpaidMemory));
      console.log(row("voucher → payee check + memory journal → 200", ch.paidMemory));
      console.log(`   ${overhead(ch.paidMemory, ch.unpaidMemory)}`);
      console.log(row("   overhead per pair (paid − unpaid), memory journal", ch.overheadMemory));
      console.log(row("unpaid request (payee in its own process)", ch.unpaidOwnProcess));
      console.log(row("voucher → payee in its own process, file journal → 200", ch.paidOwnProcess));
      console.log(row("   overhead per pair (paid − unpaid), own process", ch.overheadOwnProcess));
      console.log(row("plain fetch of the unpaid route (client run)", ch.unpaidClient));
      console.log(row("client.pay: gateway signs the voucher + paid request", ch.paidClient));
      console.log(`   ${overhead(ch.paidClient, ch.unpaidClient)}`);
      console.log(row("   overhead per pair (paid − unpaid), client", ch.overheadClient));
      console.log("   settlement on chain per charge (gateway's settle_channel transactions, fees from the ledger)");
      for (const s of ch.settlement) {
        console.log(
          `     batch ${String(s.batch).padStart(3)}: ${s.transactions} tx, ${(s.transactions / s.charges).toFixed(3)} tx/charge, ${Math.round(s.lamports / s.charges)} lamports/charge`,
        );
      }
      console.log(`     record_payment (one settlement per payment): 1 tx/charge, ${ch.recordPayment.lamports} lamports/charge`);
      goals.push(
        goalLine({
          label: "channel voucher, payee overhead per pair (file journal)",
          p99_ms: ch.overheadFile.p99,
          goal_ms: GOAL_CHANNEL_OVERHEAD_P99_MS,
        }),
      );
      goals.push(
        goalLine({
          label: "channel voucher, payee overhead per pair (own process, file journal)",
          p99_ms: ch.overheadOwnProcess.p99,
          goal_ms: GOAL_CHANNEL_OVERHEAD_P99_MS,
        }),
      );
      goals.push(
        goalLine({
          label: "channel voucher, payee overhead per pair (memory journal)",
          p99_ms: ch.overheadMemory.p99,
          goal_ms: GOAL_CHANNEL_OVERHEAD_P99_MS,
        }),
      );
      goals.push(
        goalLine({
          label: "channel voucher, client end to end overhead per pair",
          p99_ms: ch.overheadClient.p99,
          goal_ms: GOAL_CHANNEL_OVERHEAD_P99_MS,
        }),
      );
    }

    console.log("\ngoals");
    for (const goal of goals) console.log(`  ${goal}`);
    console.log(`load average at the end ${load()}`);
  } finally {
    await system.stop();
    await db.drop();
  }
  if (problems.length > 0) {
    console.error(`\nwrong answers:\n  ${problems.slice(0, 20).join("\n  ")}`);
    process.exitCode = 1;
  }
}

await run();
