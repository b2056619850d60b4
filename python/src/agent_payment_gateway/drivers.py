"""Performing a flow's effects (effects.py): ``run_sync`` with httpx.Client, ``run_async`` with
httpx.AsyncClient. The only module that sends bytes or sleeps.

Each request is one attempt bounded by its ``timeout``: httpx's connect, write, read and pool
timeouts are each set to it, and the answer is streamed with a deadline checked as it arrives
(async: ``anyio.fail_after`` bounds the whole attempt exactly; sync: the deadline is checked
between chunks, so a server that drips its answer can hold an attempt up to about twice the
timeout). A body larger than ``max_answer_bytes`` (decoded) is refused without reading the rest.
"""

from __future__ import annotations

import time
from typing import TypeVar

import anyio
import httpx

from .effects import AnswerTooLargeError, Flow, HttpAnswer, HttpRequest, NetworkFailure, Sleep
from .in_flight import AsyncInFlight, SyncInFlight

T = TypeVar("T")


def run_sync(flow: Flow[T], http: httpx.Client, in_flight: SyncInFlight | None = None) -> T:
    """Drives ``flow`` to its end; returns its value or raises what it raised. ``in_flight`` bounds
    the requests sent at once (shared by every flow of one client; in_flight.py)."""
    priority = 0 if in_flight is None else in_flight.next_operation()
    try:
        to_send: HttpAnswer | None = None
        to_throw: NetworkFailure | None = None
        while True:
            try:
                effect = flow.send(to_send) if to_throw is None else flow.throw(to_throw)
            except StopIteration as done:
                value: T = done.value
                return value
            to_send, to_throw = None, None
            if isinstance(effect, Sleep):
                time.sleep(effect.seconds)
                continue
            try:
                if in_flight is None:
                    to_send = _send_sync(http, effect)
                else:
                    in_flight.acquire(priority)
                    try:
                        to_send = _send_sync(http, effect)
                    finally:
                        in_flight.release()
            except NetworkFailure as failure:
                to_throw = failure
    finally:
        flow.close()


async def run_async(flow: Flow[T], http: httpx.AsyncClient, in_flight: AsyncInFlight | None = None) -> T:
    """``run_sync`` for the event loop (asyncio or trio, through anyio)."""
    priority = 0 if in_flight is None else in_flight.next_operation()
    try:
        to_send: HttpAnswer | None = None
        to_throw: NetworkFailure | None = None
        while True:
            try:
                effect = flow.send(to_send) if to_throw is None else flow.throw(to_throw)
            except StopIteration as done:
                value: T = done.value
                return value
            to_send, to_throw = None, None
            if isinstance(effect, Sleep):
                await anyio.sleep(effect.seconds)
                continue
            try:
                if in_flight is None:
                    to_send = await _send_async(http, effect)
                else:
                    await in_flight.acquire(priority)
                    try:
                        to_send = await _send_async(http, effect)
                    finally:
                        in_flight.release()
            except NetworkFailure as failure:
                to_throw = failure
    finally:
        flow.close()


def _timeout(request: HttpRequest) -> httpx.Timeout:
    return httpx.Timeout(request.timeout)


def _check_declared(request: HttpRequest, response: httpx.Response) -> None:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > request.max_answer_bytes:
        raise AnswerTooLargeError(f"{request.url}: answer of {declared} bytes exceeds {request.max_answer_bytes}")


def _send_sync(http: httpx.Client, request: HttpRequest) -> HttpAnswer:
    deadline = time.monotonic() + request.timeout
    try:
        with http.stream(
            request.method,
            request.url,
            headers=dict(request.headers),
            content=request.body,
            timeout=_timeout(request),
            follow_redirects=False,
        ) as response:
            _check_declared(request, response)
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > request.max_answer_bytes:
                    raise AnswerTooLargeError(f"{request.url}: answer exceeds {request.max_answer_bytes} bytes")
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise NetworkFailure(request.url, None, timed_out=True)
            return HttpAnswer(response.status_code, response.headers, b"".join(chunks))
    except httpx.TimeoutException as error:
        raise NetworkFailure(request.url, error, timed_out=True) from error
    except httpx.TransportError as error:
        raise NetworkFailure(request.url, error) from error


async def _send_async(http: httpx.AsyncClient, request: HttpRequest) -> HttpAnswer:
    try:
        with anyio.fail_after(request.timeout):
            async with http.stream(
                request.method,
                request.url,
                headers=dict(request.headers),
                content=request.body,
                timeout=_timeout(request),
                follow_redirects=False,
            ) as response:
                _check_declared(request, response)
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > request.max_answer_bytes:
                        raise AnswerTooLargeError(f"{request.url}: answer exceeds {request.max_answer_bytes} bytes")
                    chunks.append(chunk)
                return HttpAnswer(response.status_code, response.headers, b"".join(chunks))
    except TimeoutError as error:
        raise NetworkFailure(request.url, error, timed_out=True) from error
    except httpx.TimeoutException as error:
        raise NetworkFailure(request.url, error, timed_out=True) from error
    except httpx.TransportError as error:
        raise NetworkFailure(request.url, error) from error
