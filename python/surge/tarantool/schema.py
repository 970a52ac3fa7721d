"""Space and index names from the server's `_vspace` and `_vindex` views.

The schema is loaded after connecting and again whenever a reply carries a
schema version other than the one it was loaded at. Name lookups never touch
the network: an unknown name raises `SchemaError` before anything is sent
(callers may reload once and retry, see `Connection._space`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from surge.tarantool.errors import SchemaError

VSPACE_ID = 281
VINDEX_ID = 289


@dataclasses.dataclass
class SpaceInfo:
    """One space: id, name, field names (name -> position) and indexes (name -> id)."""

    id: int
    name: str
    engine: str = "memtx"
    field_names: dict[str, int] | None = None
    indexes: dict[str, int] = dataclasses.field(default_factory=dict)

    def index_id(self, index: int | str) -> int:
        """The id of index `index` (a name or an id)."""
        if isinstance(index, int):
            return index
        try:
            return self.indexes[index]
        except KeyError:
            raise SchemaError(f"space {self.name!r} has no index {index!r}") from None


class Schema:
    """Spaces by name and by id, at one schema version."""

    def __init__(self, version: int = 0) -> None:
        self.version = version
        # Keyed by name; the hot paths look a space up here whether they were given
        # a name or an id (an id simply misses and takes the slow path). Never
        # changed once built: `IprotoLane` keeps its last lookup while the
        # connection's name table is the same object.
        self.by_name: dict[int | str, SpaceInfo] = {}
        self.by_id: dict[int, SpaceInfo] = {}

    @classmethod
    def from_rows(cls, version: int, spaces: list[Any], indexes: list[Any]) -> Schema:
        """Build from `_vspace` and `_vindex` rows."""
        s = cls(version)
        for row in spaces:
            sid, _owner, name, engine = row[0], row[1], row[2], row[3]
            fmt = row[6] if len(row) > 6 else []
            names = {f["name"]: i for i, f in enumerate(fmt) if isinstance(f, dict) and "name" in f}
            info = SpaceInfo(sid, name, engine, names or None)
            s.by_name[name] = info
            s.by_id[sid] = info
        for row in indexes:
            sid, iid, iname = row[0], row[1], row[2]
            sp = s.by_id.get(sid)
            if sp is not None:
                sp.indexes[iname] = iid
        return s

    def space(self, space: int | str) -> SpaceInfo:
        """The space named (or numbered) `space`; raises `SchemaError` if unknown."""
        if isinstance(space, str):
            info = self.by_name.get(space)
        elif isinstance(space, int) and not isinstance(space, bool):
            info = self.by_id.get(space)
            if info is None:
                # An id we have not seen: let the server judge it.
                return SpaceInfo(space, str(space))
        else:
            raise SchemaError(f"space must be a name or an id, not {type(space).__name__}")
        if info is None:
            raise SchemaError(f"no space named {space!r}")
        return info
