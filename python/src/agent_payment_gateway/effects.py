"""What the client's flows ask of the outside world, written once for both clients.

Every operation (``pay``'s seven steps, the gateway transport with its retries, the server helper)
is a generator that *yields* effects — an HTTP request to send, a pause — and receives their
results; it performs no I/O itself. ``drivers.run_sync`` performs the effects with
``httpx.Client`` and ``time.sleep``, ``drivers.run_async`` with ``httpx.AsyncClient`` and
``anyio.sleep``. So ``Client`` and ``AsyncClient`` run the same code step for step, and a rule
(what is retried, which key is sent, when a reservation is released) cannot drift between them.
(httpx's own authentication flows work the same way.)

A connection-level failure (refused, reset, a timeout) is thrown into the generator at the
``yield`` of its request as ``NetworkFailure``; an HTTP answer of any status is sent back as
``HttpAnswer``.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import httpx

T = TypeVar("T")

#: The largest answer body read into memory (the paid API's or the gateway's).
MAX_ANSWER_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes | None = None
    #: Seconds for the whole attempt: connecting, sending, and reading the answer to its end.
    timeout: float = 30.0
    max_answer_bytes: int = MAX_ANSWER_BYTES


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    status: int
    headers: httpx.Headers
    body: bytes = field(repr=False)

    def header(self, name: str) -> str | None:
        value: str | None = self.headers.get(name)
        return value


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


Effect = HttpRequest | Sleep
#: A flow: yields effects, receives an ``HttpAnswer`` for a request (``None`` after a sleep), returns ``T``.
Flow = Generator[Effect, HttpAnswer | None, T]


class NetworkFailure(Exception):  # noqa: N818 (a failure thrown into flows, not an error class of the API)
    """No HTTP answer: the connection failed or the attempt took longer than its timeout."""

    def __init__(self, url: str, cause: BaseException | None, *, timed_out: bool = False) -> None:
        what = "timed out" if timed_out else "got no answer"
        detail = "" if cause is None else f": {type(cause).__name__}: {cause}"
        super().__init__(f"{url} {what}{detail}")
        self.url = url
        self.timed_out = timed_out


class AnswerTooLargeError(ValueError):
    """An answer body beyond ``max_answer_bytes`` (not read further)."""


def send(request: HttpRequest) -> Flow[HttpAnswer]:
    """Sends one request; raises ``NetworkFailure`` when no answer came."""
    answer = yield request
    if not isinstance(answer, HttpAnswer):
        raise TypeError("a driver answered an HTTP request with something else")
    return answer


def sleep(seconds: float) -> Flow[None]:
    if seconds > 0:
        yield Sleep(seconds)
