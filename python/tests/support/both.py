"""One test body for both clients: the tests are ``async def`` and ``await done(client.op(...))``,
which awaits what ``AsyncClient`` returns and passes through what ``Client`` returned. The
synchronous client then runs on the test's event loop thread, blocking it, which is harmless:
every server the tests talk to runs in another thread or process."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import Any, TypeVar, overload

from agent_payment_gateway import AsyncClient, Client, PaymentResult

T = TypeVar("T")

AnyClient = Client | AsyncClient


@overload
async def done(value: Awaitable[PaymentResult] | PaymentResult) -> PaymentResult: ...


@overload
async def done(value: Awaitable[T] | T) -> T: ...


async def done(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


async def close(client: AnyClient) -> None:
    if isinstance(client, AsyncClient):
        await client.aclose()
    else:
        client.close()
