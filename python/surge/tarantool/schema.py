"""Space and index names from the server's `_vspace` and `_vindex` views.

The schema is loaded after connecting and again whenever a reply carries a
schema version other than the one it was loaded at. Name lookups never touch
the network: an unknown name raises `SchemaError` before anything is sent
(callers may reload once and retry, see `Connection._space`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from surge.tarantool.errors import SchemaError

VSPACE_ID = 281
VINDEX_ID = 289


@dataclasses.dataclass
class SpaceInfo:
    """One space: id, name, field names (name -> position), indexes (name -> id)
    and each index's parts (id -> field positions)."""

    id: int
    name: str
    engine: str = "memtx"
    field_names: dict[str, int] | None = None
    indexes: dict[str, int] = dataclasses.field(default_factory=dict)
    parts: dict[int, list[int]] = dataclasses.field(default_factory=dict)

    def index_id(self, index: int | str) -> int:
        """The id of index `index` (a name or an id)."""
        if isinstance(index, int):
            return index
        try:
            return self.indexes[index]
        except KeyError:
            raise SchemaError(f"space {self.name!r} has no index {index!r}") from None

    def key_by_names(self, index: int | str, key: Mapping[str, Any]) -> list:
        """A key given as ``{field name: value}``, laid out by the parts of index
        `index` (asynctnt's dict keys). The names must be a prefix of the parts:
        a name not in the format, or a part left out before one given, raises
        `SchemaError` (asynctnt drops the first and shifts the second: either
        selects other tuples than asked for)."""
        names = self.field_names or {}
        parts = self.parts.get(self.index_id(index), [])
        for name in key:
            if name not in names:
                raise SchemaError(f"space {self.name!r} has no field named {name!r}")
        by_pos = {names[n]: v for n, v in key.items()}
        out = []
        for pos in parts:
            if pos not in by_pos:
                break
            out.append(by_pos.pop(pos))
        if by_pos:
            field = {p: n for n, p in names.items()}
            missing = [field.get(p, str(p)) for p in parts[len(out) : len(out) + 1]]
            raise SchemaError(
                f"key {dict(key)!r} is not a prefix of index {index!r} of space"
                f" {self.name!r}: give {missing[0]!r} too, or a list"
            )
        return out


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
                sp.parts[iid] = [_part_field(p) for p in (row[5] if len(row) > 5 else ())]
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


def _part_field(part: Any) -> int:
    """An index part's field position: ``{field = n, ...}`` or ``[n, type]`` (the
    format of indexes made before 1.7.6)."""
    return part["field"] if isinstance(part, dict) else part[0]
