"""JSON to and from the gateway, exact for money.

The gateway reads every number token of a request from its digits (docs/rest.md "Money at the
edge") and writes amounts as exact number tokens in their shortest form. So the client writes a
``Decimal`` as its plain digits (``0.05``, never ``5E-2`` and never through a float) and reads
every non-integer number of an answer as a ``Decimal``. The paid API's own answers (``data`` of a
payment result) are the API's content, parsed with the standard ``json`` module as they are.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

#: Nesting beyond this is refused when writing (a cycle or a runaway structure, not a request).
MAX_DEPTH = 64


def dumps(value: object) -> str:
    """Compact JSON text; ``Decimal`` as plain digits, floats by their shortest ``repr``."""
    parts: list[str] = []
    _write(value, parts, 0)
    return "".join(parts)


def _write(value: object, parts: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"JSON nesting deeper than {MAX_DEPTH}")
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, str):
        parts.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        parts.append(str(int(value)))
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"not a finite number: {value}")
        parts.append(_plain(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value}")
        parts.append(repr(value))
    elif isinstance(value, Mapping):
        parts.append("{")
        for index, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, got {type(key).__name__}")
            if index:
                parts.append(",")
            parts.append(json.dumps(key, ensure_ascii=False))
            parts.append(":")
            _write(item, parts, depth + 1)
        parts.append("}")
    elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _write(item, parts, depth + 1)
        parts.append("]")
    else:
        raise TypeError(f"not JSON-serializable: {type(value).__name__}")


def _plain(value: Decimal) -> str:
    """``Decimal("1E+2")`` → ``"100"``, ``Decimal("0.050")`` → ``"0.05"``: digits only, shortest."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def loads(text: str | bytes) -> Any:
    """A gateway answer: non-integer numbers as ``Decimal``; NaN and Infinity refused."""
    return json.loads(text, parse_float=Decimal, parse_constant=_refuse_constant)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")
