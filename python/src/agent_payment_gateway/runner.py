"""How a resource runs its flows: the sync client's runner returns the value, the async client's
an awaitable of it. Resources hold one and stay otherwise identical."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, TypeVar

from .effects import Flow

T = TypeVar("T")


class SyncRunner(Protocol):
    def __call__(self, flow: Flow[T], /) -> T: ...


class AsyncRunner(Protocol):
    def __call__(self, flow: Flow[T], /) -> Awaitable[T]: ...
