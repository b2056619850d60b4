"""MPP session tokens on the paying side (spec 4.4 step 5, 4.7 ``pay`` step 4): one token per
(scope, service origin), in this process's memory only. The scope is the agent, or the agent and
the invocation it pays under for a ``with_parent`` client. Nothing persists it: a new process
negotiates a new session. Bounded: the oldest entry goes when the store is full. Safe to share
between threads (the sync client may be used from several).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

MAX_SESSIONS = 1_000


@dataclass(frozen=True, slots=True)
class MppSession:
    token: str = field(repr=False)
    #: What one call costs on this session (the amount it was negotiated for), in base units.
    amount_units: int
    session_id: str | None = None


class MppSessions:
    def __init__(self) -> None:
        self._sessions: OrderedDict[tuple[str, str], MppSession] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, scope: str, origin: str) -> MppSession | None:
        with self._lock:
            return self._sessions.get((scope, origin))

    def put(self, scope: str, origin: str, session: MppSession) -> None:
        with self._lock:
            self._sessions.pop((scope, origin), None)
            if len(self._sessions) >= MAX_SESSIONS:
                self._sessions.popitem(last=False)
            self._sessions[(scope, origin)] = session

    def forget(self, scope: str, origin: str) -> None:
        with self._lock:
            self._sessions.pop((scope, origin), None)

    def __len__(self) -> int:
        return len(self._sessions)

    def __repr__(self) -> str:
        # Never show tokens.
        return f"MppSessions(sessions={len(self)})"
