/**
 * What the pay benches (bench/client, bench/mcp) share: the `--rounds` / `--warmup` flags, the
 * whole system on a fresh database with a funded paying agent ("payer") and a seller's agent
 * ("api") to pay to, calls interleaved round by round, and the exit code (1 only for a wrong
 * answer). The caller measures inside `run` and pushes every wrong answer onto `wrong`.
 */
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { pino } from "pino";
import { startSystem, type System } from "../../scripts/system.js";
import { Client } from "../../sdk/src/client.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { timed } from "../gateway/latency.js";

export interface Rounds {
  readonly rounds: number;
  readonly warmup: number;
}

export function roundsFlags(defaults: { rounds: number; warmup: number }): Rounds {
  const { values } = parseArgs({
    options: { rounds: { type: "string", default: String(defaults.rounds) }, warmup: { type: "string", default: String(defaults.warmup) } },
  });
  const rounds = Number(values.rounds);
  const warmup = Number(values.warmup);
  if (!Number.isInteger(rounds) || rounds <= 0) throw new Error("--rounds must be a positive integer");
  if (!Number.isInteger(warmup) || warmup < 0) throw new Error("--warmup must be a non-negative integer");
  return { rounds, warmup };
}

export interface PayBench {
  readonly system: System;
  readonly buyer: { readonly apiKey: string };
  readonly seller: { readonly apiKey: string };
  /** The seller's agent's wallet: where the paid API is paid. */
  readonly payTo: string;
  /** The buyer's funded agent "payer". */
  readonly client: Client;
  readonly wrong: string[];
}

/** Runs `run` on a started system, then stops it; exits 1 when `run` recorded a wrong answer. */
export async function runPayBench(title: string, fundUsdc: number, run: (bench: PayBench) => Promise<void>): Promise<never> {
  const db = await createFreshDatabase();
  const system = await startSystem({ databaseUrl: db.url, allowPrivateNetworks: true, logger: pino({ level: "warn" }) });
  const wrong: string[] = [];
  try {
    console.log(
      `${title} on ${availableParallelism()} cores, load average ${loadavg()
        .map((x) => x.toFixed(1))
        .join(" / ")}`,
    );
    const buyer = await system.createAccount("bench buyer");
    const seller = await system.createAccount("bench seller");
    const register = async (apiKey: string, agentId: string): Promise<string> => {
      const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
      const created = await fetch(`${system.apiUrl}/v1/agents`, { method: "POST", headers, body: JSON.stringify({ agentId }) });
      if (created.status !== 201) throw new Error(`register ${agentId}: ${created.status} ${await created.text()}`);
      const wallet = (await (await fetch(`${system.apiUrl}/v1/agents/${agentId}/wallet`, { headers })).json()) as { address: string };
      return wallet.address;
    };
    await register(buyer.apiKey, "payer");
    const payTo = await register(seller.apiKey, "api");
    const client = new Client({ agentId: "payer", apiKey: buyer.apiKey, baseUrl: system.apiUrl });
    await client.wallet.fund({ usdc: fundUsdc });
    await run({ system, buyer, seller, payTo, client, wrong });
  } finally {
    await system.stop();
    await db.drop();
  }
  if (wrong.length > 0) {
    console.error(`wrong answers (${wrong.length}): ${wrong.slice(0, 5).join("; ")}`);
    process.exit(1);
  }
  // The official packages' RPC websocket clients keep reconnecting to the stopped ledger and
  // offer no way to close them from their public API: end the process explicitly.
  process.exit(0);
}

/**
 * Every call `warmup` times unmeasured, then `rounds` times measured, interleaved round by round
 * (each round calls them all in the given order) so a change in the machine's load hits all alike.
 */
export async function interleaved<K extends string>(
  calls: Record<K, () => Promise<void>>,
  { rounds, warmup }: Rounds,
): Promise<Record<K, number[]>> {
  const entries = Object.entries(calls) as [K, () => Promise<void>][];
  for (let i = 0; i < warmup; i += 1) for (const [, call] of entries) await call();
  const samples = Object.fromEntries(entries.map(([key]) => [key, [] as number[]])) as Record<K, number[]>;
  for (let i = 0; i < rounds; i += 1) for (const [key, call] of entries) samples[key].push((await timed(call))[1]);
  return samples;
}
