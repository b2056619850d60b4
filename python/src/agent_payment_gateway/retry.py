"""Retry discipline shared by the gateway transport and the paid-API calls of ``pay``.

Which failures are transient, and how long to wait before the next attempt: exponential backoff
with full jitter (a uniform wait in ``[0, min(max_delay, base_delay * 2**retry)]``), or the
server's ``Retry-After``, honoured up to ``max_delay``. The same rules as the TypeScript client's
``sdk/src/retry.ts``; times here are seconds.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

_SECONDS = re.compile(r"^\d+$")


@dataclass(frozen=True, slots=True)
class RetryOptions:
    #: Retries after the first attempt (spec 4.6: default 3).
    max_retries: int = 3
    #: First backoff ceiling in seconds; doubles per retry.
    base_delay: float = 0.5
    #: No single wait is longer, whatever the server's Retry-After says.
    max_delay: float = 20.0


def backoff_delay(
    retry: int,
    options: RetryOptions,
    retry_after: float | None = None,
    uniform: float | None = None,
) -> float:
    """Seconds to wait before retry number ``retry + 1`` (``uniform`` in [0, 1) for tests)."""
    if retry_after is not None:
        return min(max(0.0, retry_after), options.max_delay)
    ceiling = min(options.max_delay, options.base_delay * 2.0 ** min(retry, 30))
    # Jitter spreads retries of many clients apart; it is not a secret.
    draw = random.random() if uniform is None else uniform  # noqa: S311
    return draw * ceiling


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After: 2`` or an HTTP date → seconds from now; None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if _SECONDS.match(text):
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
