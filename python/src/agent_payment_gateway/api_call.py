"""Requests to the paid API itself (not the gateway), retried on transient failures. What counts
as transient depends on the step (as ``sdk/src/api-call.ts``):

- the original, unpaid request is retried only when no answer came (connection failure, timeout);
  any answer, a 5xx included, is the API's answer and is passed through;
- a paid request (carrying a signed x402 payment or an MPP session) is also retried on 5xx, with
  the SAME payment headers: the facilitator claims each payment's nonce once, so a retry can never
  pay twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from .effects import Flow, HttpAnswer, HttpRequest, NetworkFailure, send, sleep
from .retry import RetryOptions, backoff_delay, parse_retry_after

_JSON_TYPE = re.compile(r"[/+]json\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ApiRequest:
    url: str
    method: str
    headers: Mapping[str, str]
    body: bytes | None = None


@dataclass(frozen=True, slots=True)
class ApiAnswer:
    status: int
    headers: httpx.Headers
    #: Parsed JSON when the body is JSON, else the text; None when empty.
    data: object

    def header(self, name: str) -> str | None:
        value: str | None = self.headers.get(name)
        return value


class ApiUnreachableError(Exception):
    """No answer came after every attempt."""

    def __init__(self, url: str, attempts: int, cause: NetworkFailure) -> None:
        super().__init__(f"{url}: no answer after {attempts} attempt(s): {cause}")
        self.url = url
        self.attempts = attempts


def call_api(request: ApiRequest, *, timeout: float, retry: RetryOptions, retry_server_errors: bool) -> Flow[ApiAnswer]:
    last_failure: NetworkFailure | None = None
    last_answer: ApiAnswer | None = None
    retry_after: float | None = None
    http = HttpRequest(request.method, request.url, request.headers, request.body, timeout)
    for attempt in range(retry.max_retries + 1):
        if attempt > 0:
            yield from sleep(backoff_delay(attempt - 1, retry, retry_after))
        try:
            raw = yield from send(http)
        except NetworkFailure as failure:
            last_failure, last_answer, retry_after = failure, None, None
            continue
        answer = ApiAnswer(raw.status, raw.headers, read_body(raw))
        if not (retry_server_errors and answer.status >= 500):
            return answer
        last_answer = answer
        retry_after = parse_retry_after(answer.header("retry-after"))
    if last_answer is not None:
        return last_answer
    assert last_failure is not None  # every attempt ended in a failure to get here
    raise ApiUnreachableError(request.url, retry.max_retries + 1, last_failure) from last_failure


def read_body(answer: HttpAnswer) -> object:
    """JSON when it says or looks like JSON (parsed with the standard ``json``), else text; None when empty."""
    if answer.body == b"":
        return None
    text = answer.body.decode(_charset(answer) or "utf-8", "replace")
    content_type = answer.header("content-type") or ""
    if _JSON_TYPE.search(content_type) or text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _charset(answer: HttpAnswer) -> str | None:
    content_type = answer.header("content-type") or ""
    match = re.search(r"charset=([\w-]+)", content_type, re.IGNORECASE)
    if match is None:
        return None
    try:
        "".encode(match.group(1))
    except LookupError:
        return None
    return match.group(1)


def headers_dict(headers: httpx.Headers) -> dict[str, str]:
    """Lower-case names; repeated headers joined with ``, `` (the fetch ``Headers`` view)."""
    out: dict[str, str] = {}
    for name, value in headers.multi_items():
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out
