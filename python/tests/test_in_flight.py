"""The in-flight limit: at most N requests at once, and a freed slot goes to the waiting request
whose operation started first; a cancelled waiter gives its place (or its slot) up."""

from __future__ import annotations

import asyncio
import threading
import time

import anyio
import pytest

from agent_payment_gateway.in_flight import AsyncInFlight, SyncInFlight

pytestmark = pytest.mark.anyio


async def test_at_most_n_in_flight_and_the_earliest_operation_goes_next() -> None:
    limit = AsyncInFlight(2)
    order: list[int] = []
    busy = 0
    most = 0

    async def request(priority: int, hold: float) -> None:
        nonlocal busy, most
        await limit.acquire(priority)
        busy += 1
        most = max(most, busy)
        order.append(priority)
        await anyio.sleep(hold)
        busy -= 1
        limit.release()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(request, 10, 0.05)
        tasks.start_soon(request, 11, 0.05)
        await anyio.sleep(0.01)
        # Waiting now, in this arrival order: a late operation, then two earlier ones.
        for priority in (30, 12, 20):
            tasks.start_soon(request, priority, 0.0)
            await anyio.sleep(0.001)

    assert most == 2
    assert order == [10, 11, 12, 20, 30]


async def test_a_waiter_cancelled_as_it_is_handed_the_slot_passes_it_on() -> None:
    limit = AsyncInFlight(1)
    await limit.acquire(0)
    served: list[int] = []

    async def wait_for_slot(priority: int) -> None:
        await limit.acquire(priority)
        served.append(priority)
        limit.release()

    first = asyncio.create_task(wait_for_slot(1))
    second = asyncio.create_task(wait_for_slot(2))
    await asyncio.sleep(0.01)
    # The slot is handed to the first waiter, which is cancelled before it runs again: it passes
    # the slot on to the second instead of keeping it.
    limit.release()
    first.cancel()
    await asyncio.wait_for(second, 5)
    assert first.cancelled()
    assert served == [2]


async def test_a_waiter_cancelled_before_its_turn_does_not_keep_the_slot() -> None:
    limit = AsyncInFlight(1)
    await limit.acquire(0)
    served: list[int] = []

    async def wait_for_slot(priority: int) -> None:
        await limit.acquire(priority)
        served.append(priority)
        limit.release()

    async with anyio.create_task_group() as outer:
        async with anyio.create_task_group() as cancelled:
            cancelled.start_soon(wait_for_slot, 1)
            await anyio.sleep(0.01)
            cancelled.cancel_scope.cancel()
        outer.start_soon(wait_for_slot, 2)
        await anyio.sleep(0.01)
        limit.release()
    assert served == [2]


def test_threads_get_slots_by_operation_order_and_never_more_than_n() -> None:
    limit = SyncInFlight(1)
    limit.acquire(0)
    order: list[int] = []

    def request(priority: int) -> None:
        limit.acquire(priority)
        order.append(priority)
        time.sleep(0.005)
        limit.release()

    threads = [threading.Thread(target=request, args=(priority,)) for priority in (9, 3, 5)]
    for thread in threads:
        thread.start()
        time.sleep(0.02)
    limit.release()
    for thread in threads:
        thread.join(5)
    assert order == [3, 5, 9]
