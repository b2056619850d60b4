"""What the Python client's ``pay`` costs over a direct request, sync and async, next to the
TypeScript client's figures from the same run; and 100 concurrent ``pay`` calls from one
``AsyncClient`` against 100 concurrent ``client.pay`` of the TypeScript client.

    npm run bench:python                                   # builds the ledger binary first
    bash scripts/python.sh bench -- --rounds 200 --concurrent 100

The system is the Python tests' fixture (test/python/system-fixture.ts: ``startSystem`` with a
fresh database, and a paid API built with the TypeScript middleware). Each client runs in a
process of its own: the TypeScript ``Client`` in bench/python/typescript-client.ts, the Python
clients here; none shares an event loop with the system. Same server, same routes, same answers,
interleaved block by block (TypeScript, Python sync, Python async):

- direct: a plain request of the paid API's free route (the baseline; ``fetch`` / ``httpx``);
- x402 pay: 402 → authorize → the paid retry → the middleware settles on the ledger → complete;
- MPP pay on a reused session: one request carrying ``X-MPP-Session``, charged on the ledger.

Concurrency: ``--concurrent`` x402 pays at once from one client (``Promise.all`` / ``asyncio.gather``),
``--concurrent-runs`` times each, alternating languages; the goal is the Python p50 and p99 within
1.2x of TypeScript's. A bench, not a test: it prints figures and exits 1 only for a wrong answer.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from tests.support.system import REPO, LineProcess, Rest, SystemProcess

from agent_payment_gateway import AsyncClient, Client, PaidResult, ServiceError

GOAL_RATIO = 1.2


def percentile(samples: Sequence[float], p: float) -> float:
    """Nearest rank (as bench/gateway/latency.ts): with fewer than 100 samples p99 is the slowest."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1)]


def row(label: str, samples: Sequence[float]) -> str:
    if not samples:
        return f"{label:<58}{0:>6}"
    mean = sum(samples) / len(samples)
    figures = [percentile(samples, 50), percentile(samples, 99), mean, max(samples)]
    return f"{label:<58}{len(samples):>6}" + "".join(f"{value:>10.2f} ms" for value in figures)


HEADER = f"{'':<58}{'n':>6}{'p50':>13}{'p99':>13}{'mean':>13}{'max':>13}"


def must_be_paid(result: object, endpoint: str) -> None:
    if not isinstance(result, PaidResult):
        raise SystemExit(f"wrong answer: {endpoint} was not paid")


def timed_sync(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return (time.perf_counter() - started) * 1000


async def timed_async(work: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await work()
    return (time.perf_counter() - started) * 1000


async def main(arguments: argparse.Namespace) -> int:
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    system = SystemProcess()
    rest = Rest(system.ready)
    ready = system.ready
    typescript_client = LineProcess(
        ["npx", "tsx", str(REPO / "bench" / "python" / "typescript-client.ts")],
        {"APG_API_URL": ready.api_url, "APG_API_KEY": ready.buyer_key, "APG_RPC_URL": ready.rpc_url},
        "the TypeScript client",
        60.0,
    )
    try:
        direct = f"{ready.paid_api}/free"
        x402 = f"{ready.paid_api}/x402/bench"
        mpp = f"{ready.paid_api}/mpp/bench"
        budget = (
            Decimal(arguments.rounds + arguments.warmup) * Decimal("0.04")
            + Decimal(arguments.concurrent * arguments.concurrent_runs) * Decimal("0.03")
            + Decimal(1)
        )
        agents: dict[str, str] = {}
        for name in ("ts", "py-sync", "py-async"):
            agents[name], _ = rest.register(f"bench-{name}")
            rest.fund(agents[name], str(budget))
        settings: dict[str, Any] = {
            "api_key": ready.buyer_key,
            "base_url": ready.api_url,
            "explorer_rpc_url": ready.rpc_url,
        }
        sync_client = Client(agent_id=agents["py-sync"], **settings)
        async_client = AsyncClient(agent_id=agents["py-async"], **settings)
        sync_http = httpx.Client()
        async_http = httpx.AsyncClient()
        samples: dict[str, list[float]] = {}
        failures = {"ts": 0, "py": 0}

        def add(key: str, values: Sequence[float]) -> None:
            samples.setdefault(key, []).extend(values)

        # Warm-up (connections, the MPP sessions, the explorer template), not measured.
        for _ in range(max(1, arguments.warmup)):
            for endpoint in (x402, mpp):
                must_be_paid(sync_client.pay(endpoint), endpoint)
                must_be_paid(await async_client.pay(endpoint), endpoint)
            sync_http.get(direct)
            await async_http.get(direct)
        typescript_client.request(
            "bench",
            agentId=agents["ts"],
            options={"rounds": max(1, arguments.warmup), "concurrent": 0, "direct": direct, "x402": x402, "mpp": mpp},
        )

        blocks = max(1, arguments.blocks)
        per_block = [
            arguments.rounds // blocks + (1 if index < arguments.rounds % blocks else 0) for index in range(blocks)
        ]
        for rounds in per_block:
            typescript = typescript_client.request(
                "bench",
                agentId=agents["ts"],
                options={"rounds": rounds, "concurrent": 0, "direct": direct, "x402": x402, "mpp": mpp},
            )
            for key in ("direct", "x402", "mpp"):
                add(f"ts-{key}", typescript[key])
            for _ in range(rounds):
                add("sync-direct", [timed_sync(lambda: sync_http.get(direct).read())])
                add("sync-x402", [timed_sync(lambda: must_be_paid(sync_client.pay(x402), x402))])
                add("sync-mpp", [timed_sync(lambda: must_be_paid(sync_client.pay(mpp), mpp))])
            for _ in range(rounds):
                add("async-direct", [await timed_async(lambda: async_http.get(direct))])
                add("async-x402", [await timed_async(lambda: async_pay(async_client, x402))])
                add("async-mpp", [await timed_async(lambda: async_pay(async_client, mpp))])

        for _ in range(arguments.concurrent_runs):
            typescript = typescript_client.request(
                "bench",
                agentId=agents["ts"],
                options={"rounds": 0, "concurrent": arguments.concurrent, "direct": direct, "x402": x402, "mpp": mpp},
            )
            add("ts-concurrent", typescript["concurrent"])
            failures["ts"] += typescript["failures"][0]
            timings = await asyncio.gather(*(timed_burst(async_client, x402) for _ in range(arguments.concurrent)))
            add("async-concurrent", [timing for timing in timings if timing is not None])
            failures["py"] += sum(1 for timing in timings if timing is None)

        print(f"\n{arguments.rounds} rounds after {arguments.warmup} warm-up, in {blocks} interleaved blocks\n")
        print(HEADER)
        for label, key in (
            ("TypeScript: direct fetch (baseline)", "ts-direct"),
            ("TypeScript: client.pay, x402", "ts-x402"),
            ("TypeScript: client.pay, MPP on a reused session", "ts-mpp"),
            ("Python sync: direct httpx.Client request (baseline)", "sync-direct"),
            ("Python sync: Client.pay, x402", "sync-x402"),
            ("Python sync: Client.pay, MPP on a reused session", "sync-mpp"),
            ("Python async: direct httpx.AsyncClient request (baseline)", "async-direct"),
            ("Python async: AsyncClient.pay, x402", "async-x402"),
            ("Python async: AsyncClient.pay, MPP on a reused session", "async-mpp"),
        ):
            print(row(label, samples[key]))
        print("\noverhead of pay over the direct request (p50 / p99):")
        for language, prefix in (("TypeScript", "ts"), ("Python sync", "sync"), ("Python async", "async")):
            base = samples[f"{prefix}-direct"]
            for protocol in ("x402", "mpp"):
                paid = samples[f"{prefix}-{protocol}"]
                print(
                    f"  {language:<13} {protocol:<5} +{percentile(paid, 50) - percentile(base, 50):.2f} ms"
                    f" / +{percentile(paid, 99) - percentile(base, 99):.2f} ms"
                )

        n = arguments.concurrent
        print(f"\n{n} concurrent x402 pays from one client, {arguments.concurrent_runs} runs each (per-call latency)\n")
        print(HEADER)
        print(row(f"TypeScript: {n} x client.pay (Promise.all)", samples["ts-concurrent"]))
        print(row(f"Python: {n} x AsyncClient.pay (asyncio.gather)", samples["async-concurrent"]))
        print(f"failed payments (not timed): TypeScript {failures['ts']}, Python {failures['py']}")
        for p in (50, 99):
            ts, py = percentile(samples["ts-concurrent"], p), percentile(samples["async-concurrent"], p)
            ratio = py / ts
            verdict = "met" if ratio <= GOAL_RATIO else "NOT met"
            print(
                f"p{p}: Python {py:.2f} ms vs TypeScript {ts:.2f} ms = {ratio:.2f}x (goal <= {GOAL_RATIO}x: {verdict})"
            )
        sync_client.close()
        await async_client.aclose()
        sync_http.close()
        await async_http.aclose()
        return 0
    finally:
        typescript_client.stop()
        rest.close()
        system.stop()


async def async_pay(client: AsyncClient, endpoint: str) -> None:
    must_be_paid(await client.pay(endpoint), endpoint)


async def timed_burst(client: AsyncClient, endpoint: str) -> float | None:
    """One pay of the burst: its latency, or None when it failed (counted, not timed, as on the
    TypeScript side: under a burst a settlement may outlast the middleware's gateway timeout)."""
    started = time.perf_counter()
    try:
        must_be_paid(await client.pay(endpoint), endpoint)
    except ServiceError:
        return None
    return (time.perf_counter() - started) * 1000


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=200, help="measured rounds per client (default 200)")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured rounds first (default 10)")
    parser.add_argument("--blocks", type=int, default=5, help="interleaved blocks the rounds are split into")
    parser.add_argument("--concurrent", type=int, default=100, help="concurrent pays from one client (default 100)")
    parser.add_argument("--concurrent-runs", type=int, default=3, help="runs of the concurrent burst per language")
    values = parser.parse_args([argument for argument in argv if argument != "--"])
    if values.rounds < 1 or values.warmup < 0 or not 0 < values.concurrent <= 200 or values.concurrent_runs < 1:
        parser.error("rounds >= 1, warmup >= 0, 1 <= concurrent <= 200, concurrent-runs >= 1")
    return values


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse(sys.argv[1:]))))
