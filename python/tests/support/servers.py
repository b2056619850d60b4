"""Real servers on loopback for the tests: an ASGI app under uvicorn, a WSGI app under wsgiref, and
a forwarding HTTP proxy that can cut a connection after the request reached the other side (the
answer is lost on its way back: what an idempotent retry must survive)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
import uvicorn

#: How long a server may take to start or stop.
START_TIMEOUT_S = 20.0


def _loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.contextmanager
def serve_asgi(app: Any) -> Iterator[str]:
    """Runs ``app`` under uvicorn in a thread (its own event loop); yields its origin."""
    sock = _loopback_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(START_TIMEOUT_S)
        sock.close()


class _QuietWsgiHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingWsgiServer(WSGIServer):
    daemon_threads = True


@contextlib.contextmanager
def serve_wsgi(app: Callable[..., Any]) -> Iterator[str]:
    """Runs a WSGI ``app`` under wsgiref in a thread; yields its origin."""
    server = make_server("127.0.0.1", 0, app, server_class=_ThreadingWsgiServer, handler_class=_QuietWsgiHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="wsgiref", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(START_TIMEOUT_S)


@dataclass
class Forwarded:
    method: str
    path: str
    headers: dict[str, str]
    dropped: bool


@dataclass
class DroppingProxy:
    """Forwards every request to ``upstream``; when ``drop(method, path, count)`` says so (``count``
    is how many requests to that method and path came before, this one included), the request IS
    forwarded and answered upstream, but the connection to the client is cut instead of answering."""

    upstream: str
    drop: Callable[[str, str, int], bool]
    seen: list[Forwarded] = field(default_factory=list)
    origin: str = ""

    def count(self, method: str, path_prefix: str) -> int:
        return sum(1 for item in self.seen if item.method == method and item.path.startswith(path_prefix))


@contextlib.contextmanager
def dropping_proxy(upstream: str, drop: Callable[[str, str, int], bool]) -> Iterator[DroppingProxy]:
    proxy = DroppingProxy(upstream, drop)
    lock = threading.Lock()
    forward = httpx.Client(base_url=upstream, timeout=60.0)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or "0")
            body = self.rfile.read(length) if length else None
            headers = {name.lower(): value for name, value in self.headers.items() if name.lower() != "host"}
            path = self.path.split("?", 1)[0]
            with lock:
                count = 1 + sum(1 for item in proxy.seen if item.method == self.command and item.path == path)
                dropped = proxy.drop(self.command, path, count)
                proxy.seen.append(Forwarded(self.command, path, headers, dropped))
            answer = forward.request(self.command, self.path, headers=headers, content=body)
            if dropped:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response(answer.status_code)
            for name, value in answer.headers.multi_items():
                if name.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                    self.send_header(name, value)
            self.send_header("content-length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = _handle  # noqa: N815 (http.server's naming)
        do_POST = _handle  # noqa: N815
        do_PUT = _handle  # noqa: N815
        do_DELETE = _handle  # noqa: N815

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="dropping-proxy", daemon=True
    )
    thread.start()
    proxy.origin = f"http://127.0.0.1:{server.server_port}"
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        forward.close()
        thread.join(START_TIMEOUT_S)
