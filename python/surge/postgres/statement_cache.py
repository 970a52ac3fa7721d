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

from collections import OrderedDict
from collections.abc import Callable

from surge._core import Statement

#: Statements kept per connection (asyncpg's default too).
DEFAULT_STATEMENT_CACHE_SIZE = 100


class StatementCache:
    """Query text -> `Statement`, bounded; `on_evict` closes one on the server."""

    __slots__ = ("_entries", "_on_evict", "max_size")

    def __init__(self, max_size: int, on_evict: Callable[[Statement], None]) -> None:
        self.max_size = max_size
        self._entries: OrderedDict[str, Statement] = OrderedDict()
        self._on_evict = on_evict

    def get(self, query: str) -> Statement | None:
        """The statement for ``query``, now the most recently used, or None."""
        s = self._entries.get(query)
        if s is not None:
            self._entries.move_to_end(query)
        return s

    def put(self, query: str, stmt: Statement) -> None:
        """Keep ``stmt``; evict (and close) the least recently used over the bound."""
        if self.max_size <= 0:
            return
        old = self._entries.pop(query, None)
        if old is not None and old is not stmt:
            self._evict(old)
        self._entries[query] = stmt
        while len(self._entries) > self.max_size:
            _, victim = self._entries.popitem(last=False)
            self._evict(victim)

    def discard(self, query: str) -> None:
        """Forget (and close) the statement for ``query`` if kept."""
        s = self._entries.pop(query, None)
        if s is not None:
            self._evict(s)

    def evict_all(self) -> None:
        """Forget and close every statement (their types' codecs changed)."""
        entries, self._entries = self._entries, OrderedDict()
        for s in entries.values():
            self._evict(s)

    def clear(self) -> None:
        """Forget everything without closing (the session they lived in is gone)."""
        for s in self._entries.values():
            s.mark_closed()
        self._entries.clear()

    def _evict(self, stmt: Statement) -> None:
        stmt.mark_closed()
        self._on_evict(stmt)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, query: object) -> bool:
        return query in self._entries
