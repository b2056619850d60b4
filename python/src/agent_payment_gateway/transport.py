"""Requests to the gateway: Bearer auth, exact JSON, problem+json → typed errors, and retries of
transient failures only (stripe-node's discipline, as the TypeScript client's ``transport.ts``):

- every POST carries an ``Idempotency-Key`` (the caller's, else a generated UUID 4) reused by every
  retry of that request, even with ``max_retries=0``, so a retried authorization or funding
  happens once;
- retried: connection failures and timeouts, 5xx answers (except 502 ``PAYMENT_FAILED``, a definite
  and stored answer), 409 answers marked ``retryable`` or ``IDEMPOTENCY_IN_PROGRESS``; never any
  other 4xx, and never an answer saying ``retryable: false``;
- the wait is full-jitter exponential backoff, or the server's ``Retry-After``;
- after ``max_retries`` retries the last failure is raised as ``PaymentError`` from it.

The transport is a description (base URL, key, limits); ``request`` returns a flow that the sync
or async driver performs.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote, urlencode, urlsplit

from . import wire_json
from .effects import Flow, HttpAnswer, HttpRequest, NetworkFailure, send, sleep
from .errors import AuthenticationError, PaymentError, ServiceError, error_from_problem
from .retry import RetryOptions, backoff_delay, parse_retry_after
from .text_input import InvalidInputError, check_text, check_texts

_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")

QueryValue = str | int | bool | None

#: The longest request URL sent: the gateway's HTTP server refuses a longer request head (16 KiB).
MAX_URL_LENGTH = 16_384


class _NoBody:
    """No JSON body (``None`` is the JSON ``null``)."""


NO_BODY: Final = _NoBody()


class TransientFailure(Exception):  # noqa: N818 (internal signal, never raised to callers)
    """A failure that may succeed when sent again with the same key."""

    def __init__(self, error: BaseException, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def segment(value: str) -> str:
    """One path segment, percent-encoded (``encodeURIComponent``)."""
    return quote(value, safe="")


class Transport:
    """The gateway's base URL, the API key and the retry limits; builds request flows."""

    def __init__(self, *, base_url: str, api_key: str, timeout: float, retry: RetryOptions) -> None:
        if not isinstance(api_key, str) or api_key == "":
            raise AuthenticationError("an API key is required (spec 5)")
        self.base_url = _parse_base_url(base_url)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise TypeError("timeout must be a positive number of seconds")
        if isinstance(retry.max_retries, bool) or not isinstance(retry.max_retries, int) or retry.max_retries < 0:
            raise TypeError("max_retries must be a non-negative integer")
        if retry.base_delay < 0 or retry.max_delay < 0:
            raise TypeError("retry delays must be non-negative")
        self.timeout = float(timeout)
        self.retry = retry
        self.__api_key = api_key

    @property
    def max_retries(self) -> int:
        return self.retry.max_retries

    def __repr__(self) -> str:
        # Never show the key: a logged client must not leak it.
        return f"Transport(base_url={self.base_url!r}, timeout={self.timeout}, max_retries={self.max_retries})"

    def url(self, path: str, query: Mapping[str, QueryValue] | None = None) -> str:
        if not path.startswith("/"):
            raise TypeError(f"path must start with /: {path}")
        pairs = [(key, _query_text(value)) for key, value in (query or {}).items() if value is not None]
        url = self.base_url + path + (("?" + urlencode(pairs)) if pairs else "")
        if len(url) > MAX_URL_LENGTH:
            longest = max(pairs, key=lambda pair: len(pair[1]))[0] if pairs else "path"
            raise InvalidInputError(longest, f"too long: the request URL would exceed {MAX_URL_LENGTH} characters")
        return url

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, QueryValue] | None = None,
        body: object = NO_BODY,
        idempotency_key: str | None = None,
    ) -> Flow[Any]:
        """The answer's JSON (``None`` when empty), or the typed error; retried as the module says."""
        # Nothing leaves with a character the gateway cannot store (text_input.py).
        check_text("path", path)
        check_texts("", dict(query or {}))
        if not isinstance(body, _NoBody):
            check_texts("", body)
        upper = method.upper()
        headers = {"accept": "application/json, application/problem+json", "authorization": f"Bearer {self.__api_key}"}
        content: bytes | None = None
        if not isinstance(body, _NoBody):
            content = wire_json.dumps(body).encode("utf-8")
            headers["content-type"] = "application/json"
        if upper == "POST":
            key = idempotency_key if idempotency_key is not None else str(uuid.uuid4())
            if not isinstance(key, str) or not _IDEMPOTENCY_KEY.match(key):
                raise ServiceError(
                    "idempotency_key must be 1-255 visible ASCII characters", code="INVALID_IDEMPOTENCY_KEY"
                )
            headers["idempotency-key"] = key
        request = HttpRequest(upper, self.url(path, query), headers, content, self.timeout)
        return self._with_retries(request)

    def _with_retries(self, request: HttpRequest) -> Flow[Any]:
        last: TransientFailure | None = None
        for attempt in range(self.retry.max_retries + 1):
            if last is not None:
                yield from sleep(backoff_delay(attempt - 1, self.retry, last.retry_after))
            try:
                answer = yield from send(request)
                return _read_answer(answer)
            except TransientFailure as failure:
                last = failure
            except NetworkFailure as failure:
                last = TransientFailure(failure, None)
        assert last is not None  # the loop ran at least once and only exits by failing
        cause = last.error
        status = cause.status if isinstance(cause, ServiceError) else None
        code = cause.code if isinstance(cause, ServiceError) else None
        raise PaymentError(
            f"request failed after {self.retry.max_retries + 1} attempts: {cause}", code=code, status=status
        ) from cause


def _read_answer(answer: HttpAnswer) -> Any:
    parsed = _parse(answer.body)
    if 200 <= answer.status <= 299:
        return None if answer.body == b"" else parsed
    raise _classify(answer, parsed)


def _parse(body: bytes) -> Any:
    if body == b"":
        return None
    try:
        return wire_json.loads(body)
    except ValueError:
        return {"detail": body[:500].decode("utf-8", "replace")}


def _classify(answer: HttpAnswer, problem: Any) -> Exception:
    """A non-2xx answer → the typed error, wrapped as transient when a retry may succeed."""
    error = error_from_problem(answer.status, problem, answer.header("x-request-id"))
    retryable = problem.get("retryable") if isinstance(problem, dict) else None
    if retryable is False:
        return error
    retry_after = parse_retry_after(answer.header("retry-after"))
    if answer.status == 409 and (retryable is True or error.code == "IDEMPOTENCY_IN_PROGRESS"):
        return TransientFailure(error, retry_after)
    # PAYMENT_FAILED (502) is the gateway's definite answer, stored with the key: a retry replays it.
    if answer.status >= 500 and error.code != "PAYMENT_FAILED":
        return TransientFailure(error, retry_after)
    return error


def _query_text(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_base_url(value: str) -> str:
    if not isinstance(value, str):
        raise TypeError("base_url must be a string URL")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TypeError(f"base_url must be an http(s) URL: {value}")
    return value.rstrip("/")
