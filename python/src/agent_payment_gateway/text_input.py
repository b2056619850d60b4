"""The characters a text input may carry: the gateway's rule (docs/rest.md "Text fields"), as the
TypeScript client's ``text-input.ts``. Refused: the C0 controls U+0000-U+001F, DEL and the C1
controls U+007F-U+009F, and surrogate code points (a ``str`` holding one cannot be encoded as
UTF-8). PostgreSQL cannot store U+0000, and a control character in an id, a name or a URL is never
what the caller meant.

The client checks every string it is about to send (the request path, query and JSON body, and
``pay``'s endpoint, method and headers) before anything leaves: a bad value is an
``InvalidInputError`` naming the field, never a request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_UNSTORABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class InvalidInputError(TypeError):
    """A caller's value the client refuses to send. A ``TypeError`` (as every other argument check
    of this client), with ``field`` naming the input (``name``, ``allowed_domains[2]``,
    ``endpoint``, ``headers.x-trace``) and the gateway's code for the same refusal."""

    code = "BAD_USER_INPUT"

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}")
        self.field = field


def find_unstorable(text: str) -> tuple[int, str] | None:
    """The index and a printable name of the first refused character of ``text``, or None."""
    match = _UNSTORABLE.search(text)
    if match is None:
        return None
    code = ord(match.group(0))
    kind = "a surrogate" if code >= 0xD800 else "a control character"
    return match.start(), f"{kind} (U+{code:04X})"


def check_text(field: str, text: str) -> None:
    """Raises ``InvalidInputError`` naming ``field`` when ``text`` holds a refused character."""
    found = find_unstorable(text)
    if found is not None:
        index, character = found
        raise InvalidInputError(field, f"contains {character} at position {index}, which cannot be stored")


def check_texts(field: str, value: object) -> None:
    """Checks every string inside a JSON-like value (mapping keys too), naming each by its path."""
    if isinstance(value, str):
        check_text(field or "body", value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            path = str(key) if field == "" else f"{field}.{key}"
            if isinstance(key, str):
                check_text(path, key)
            check_texts(path, item)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_texts(f"{field}[{index}]", item)
