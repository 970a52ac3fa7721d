"""`StatementCache`: prepared statements by query text, least recently used
out first.

Why LRU: a service runs a small fixed set of queries over and over; those stay,
and one-off queries (ad hoc SQL, generated IN lists) pass through without
pushing the hot ones out for long. Eviction closes the statement on the server
(each one holds a plan in the backend's memory) and marks it closed, so a use
that raced with the eviction raises `StatementGone` and prepares again rather
than binding to a name the server has forgotten.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from surge._core import Statement

#: Statements kept per connection (asyncpg's default too).
DEFAULT_STATEMENT_CACHE_SIZE = 100
#: Longest query text (characters) whose statement is kept (asyncpg's 15 KiB):
#: a huge generated query is rarely run twice, and its plan is big.
DEFAULT_MAX_CACHEABLE_STATEMENT_SIZE = 15 * 1024
#: Seconds a statement stays cached (0: until evicted). asyncpg's default is 300;
#: surge's is 0 because a statement made stale by DDL is prepared again anyway
#: (see `Session.run`), and no clock is read per query; asyncpg's
#: ``max_cached_statement_lifetime=`` is honoured when given.
DEFAULT_MAX_CACHED_STATEMENT_LIFETIME = 0.0


class StatementCache:
    """Query text -> `Statement`, bounded; `on_evict` closes one on the server."""

    __slots__ = ("_born", "_entries", "_on_evict", "max_lifetime", "max_query_size", "max_size")

    def __init__(
        self,
        max_size: int,
        on_evict: Callable[[Statement], None],
        max_query_size: int = DEFAULT_MAX_CACHEABLE_STATEMENT_SIZE,
        max_lifetime: float = DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    ) -> None:
        self.max_size = max_size
        self.max_query_size = max_query_size
        self.max_lifetime = max_lifetime
        self._entries: OrderedDict[str, Statement] = OrderedDict()
        #: When each statement was kept (monotonic), with a lifetime only.
        self._born: dict[str, float] = {}
        self._on_evict = on_evict

    def keeps(self, query: str) -> bool:
        """True when a statement for ``query`` may be kept (else it is closed after use)."""
        return self.max_size > 0 and (self.max_query_size <= 0 or len(query) <= self.max_query_size)

    def get(self, query: str) -> Statement | None:
        """The statement for ``query``, now the most recently used, or None."""
        s = self._entries.get(query)
        if s is not None:
            if self.max_lifetime and time.monotonic() - self._born[query] > self.max_lifetime:
                self.discard(query)  # too old: prepared again (asyncpg's rule)
                return None
            self._entries.move_to_end(query)
        return s

    def put(self, query: str, stmt: Statement) -> None:
        """Keep ``stmt``; evict (and close) the least recently used over the bound."""
        if not self.keeps(query):
            return
        old = self._entries.pop(query, None)
        if old is not None and old is not stmt:
            self._evict(old)
        self._entries[query] = stmt
        if self.max_lifetime:
            self._born[query] = time.monotonic()
        while len(self._entries) > self.max_size:
            q, victim = self._entries.popitem(last=False)
            self._born.pop(q, None)
            self._evict(victim)

    def discard(self, query: str) -> None:
        """Forget (and close) the statement for ``query`` if kept."""
        self._born.pop(query, None)
        s = self._entries.pop(query, None)
        if s is not None:
            self._evict(s)

    def evict_all(self) -> None:
        """Forget and close every statement (their types' codecs changed)."""
        entries, self._entries = self._entries, OrderedDict()
        self._born.clear()
        for s in entries.values():
            self._evict(s)

    def clear(self) -> None:
        """Forget everything without closing (the session they lived in is gone)."""
        for s in self._entries.values():
            s.mark_closed()
        self._entries.clear()
        self._born.clear()

    def _evict(self, stmt: Statement) -> None:
        stmt.mark_closed()
        self._on_evict(stmt)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, query: object) -> bool:
        return query in self._entries
