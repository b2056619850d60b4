"""How many HTTP requests one client has in flight, and who goes next.

A client sends at most ``max_in_flight`` requests at once (httpx's pool spends CPU quadratic in
its queued requests and connections, so the queue is kept here, where waiting costs nothing).
A waiting request is served in the order its *operation* started, not the order the request was
made: a ``pay`` at its third request goes before a ``pay`` that has not sent its first. Under a
burst (100 concurrent pays) the operations then finish in the order they started, as they do when
every request is in flight at once, instead of all finishing together at the end.

``AsyncInFlight`` (anyio: asyncio or trio) and ``SyncInFlight`` (threads) have the same rules: a
released slot is handed to the earliest waiting operation; a waiter that is cancelled (async)
gives its place up, or passes on a slot it was handed.
"""

from __future__ import annotations

import heapq
import itertools
import threading

import anyio


class _Waiter:
    """A request waiting for a slot, ordered by its operation's start, then its own arrival."""

    __slots__ = ("gone", "handed", "key")

    def __init__(self, priority: int, arrival: int) -> None:
        self.key = (priority, arrival)
        self.handed = False
        self.gone = False

    def __lt__(self, other: _Waiter) -> bool:
        return self.key < other.key


class _AsyncWaiter(_Waiter):
    __slots__ = ("event",)

    def __init__(self, priority: int, arrival: int) -> None:
        super().__init__(priority, arrival)
        self.event = anyio.Event()


class AsyncInFlight:
    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._waiters: list[_AsyncWaiter] = []
        self._arrivals = itertools.count()
        self._operations = itertools.count()

    def next_operation(self) -> int:
        """The priority of an operation starting now (earlier is served first)."""
        return next(self._operations)

    async def acquire(self, priority: int) -> None:
        if self._free > 0:
            self._free -= 1
            return
        waiter = _AsyncWaiter(priority, next(self._arrivals))
        heapq.heappush(self._waiters, waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.handed:
                self.release()  # handed a slot as it was cancelled: pass it on
            else:
                waiter.gone = True
            raise

    def release(self) -> None:
        while self._waiters:
            waiter = heapq.heappop(self._waiters)
            if waiter.gone:
                continue
            waiter.handed = True
            waiter.event.set()
            return
        self._free += 1


class SyncInFlight:
    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._waiters: list[_Waiter] = []
        self._arrivals = itertools.count()
        self._operations = itertools.count()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def next_operation(self) -> int:
        with self._lock:
            return next(self._operations)

    def acquire(self, priority: int) -> None:
        with self._lock:
            if self._free > 0:
                self._free -= 1
                return
            waiter = _Waiter(priority, next(self._arrivals))
            heapq.heappush(self._waiters, waiter)
            try:
                while not waiter.handed:
                    self._changed.wait()
            except BaseException:  # KeyboardInterrupt while waiting
                if waiter.handed:
                    self._release_locked()
                else:
                    waiter.gone = True
                raise

    def release(self) -> None:
        with self._lock:
            self._release_locked()

    def _release_locked(self) -> None:
        while self._waiters:
            waiter = heapq.heappop(self._waiters)
            if waiter.gone:
                continue
            waiter.handed = True
            self._changed.notify_all()
            return
        self._free += 1
