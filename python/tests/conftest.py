"""Fixtures: the whole system (once per session), REST helpers, both clients, the Python-built paid APIs.

The system is ``test/python/system-fixture.ts`` (``startSystem`` on free ports with a fresh
database, paid APIs built with the TypeScript middleware), started by the first test that needs
it and stopped at the end of the session. Tests that need no system (unit tests) never start it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest

from agent_payment_gateway import AsyncClient, Client

from .support.both import AnyClient, close, done
from .support.python_api import Handled, options, starlette_app, wsgi_app
from .support.servers import serve_asgi, serve_wsgi
from .support.system import Ready, Rest, SystemProcess

MakeClient = Callable[..., AnyClient]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def system() -> Iterator[SystemProcess]:
    process = SystemProcess()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def ready(system: SystemProcess) -> Ready:
    return system.ready


@pytest.fixture(scope="session")
def rest(ready: Ready) -> Iterator[Rest]:
    helper = Rest(ready)
    yield helper
    helper.close()


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
async def make_client(kind: str, ready: Ready) -> AsyncIterator[MakeClient]:
    """``make_client(agent_id, **options)``: a ``Client`` or an ``AsyncClient`` (by ``kind``) on the
    system's gateway with the buyer's key and short backoff; closed after the test."""
    made: list[AnyClient] = []

    def make(agent_id: str, **overrides: Any) -> AnyClient:
        settings: dict[str, Any] = {
            "agent_id": agent_id,
            "api_key": ready.buyer_key,
            "base_url": ready.api_url,
            "retry_base_delay": 0.01,
            "explorer_rpc_url": ready.rpc_url,
            **overrides,
        }
        client: AnyClient = Client(**settings) if kind == "sync" else AsyncClient(**settings)
        made.append(client)
        return client

    yield make
    for client in made:
        await close(client)


@pytest.fixture
def agent(rest: Rest, make_client: MakeClient) -> Callable[..., Any]:
    """``await agent("prefix", "1.5")``: registers an agent, funds it through the client, returns the client."""

    async def create(prefix: str, usdc: str = "0", **overrides: Any) -> AnyClient:
        agent_id, _ = rest.register(prefix)
        client = make_client(agent_id, **overrides)
        if Decimal(usdc) > 0:
            operation = await done(client.wallet.fund(Decimal(usdc)))
            assert operation.status == "confirmed"
        return client

    return create


@pytest.fixture(scope="session")
def python_handled() -> Handled:
    return Handled()


@pytest.fixture(scope="session")
def python_api(ready: Ready, python_handled: Handled) -> Iterator[str]:
    """The Starlette app with the Python helper, paying the ``python-seller`` agent; its origin."""
    app = starlette_app(options(ready.api_url, ready.seller_key, ready.sellers["python"]), python_handled)
    with serve_asgi(app) as origin:
        yield origin


@pytest.fixture(scope="session")
def python_wsgi_api(ready: Ready, python_handled: Handled) -> Iterator[str]:
    """The WSGI app with the synchronous gate, paying the ``python-seller`` agent; its origin."""
    with serve_wsgi(
        wsgi_app(options(ready.api_url, ready.seller_key, ready.sellers["python"]), python_handled)
    ) as origin:
        yield origin
