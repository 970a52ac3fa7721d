"""Values Tarantool has and Python lacks: Interval, ErrorInfo, unknown extensions."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, NamedTuple


class ConnectionState(enum.IntEnum):
    """Where a connection stands (asynctnt's names and values)."""

    CONNECTING = 1
    CONNECTED = 2
    RECONNECTING = 3
    DISCONNECTING = 4
    DISCONNECTED = 5


#: IPROTO_FEATURES bits by asynctnt's attribute names (Tarantool's numbering).
FEATURE_NAMES = (
    "streams",
    "transactions",
    "error_extension",
    "watchers",
    "pagination",
    "space_and_index_names",
    "watch_once",
    "dml_tuple_extension",
    "call_ret_tuple_extension",
    "call_arg_tuple_extension",
)


class IProtoFeatures(frozenset[int]):
    """The feature bits a server announced in IPROTO_ID (``bit in features``),
    each also a bool attribute under asynctnt's name (``features.watchers``)."""

    def __getattr__(self, name: str) -> bool:
        try:
            return FEATURE_NAMES.index(name) in self
        except ValueError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        flags = " ".join(f"{n}={i in self}" for i, n in enumerate(FEATURE_NAMES))
        return f"<IProtoFeatures {flags}>"


class Iterator(enum.IntEnum):
    """Index iterators for `Connection.select` (asynctnt's names and Tarantool's
    values); ``iterator=`` also takes their names as strings."""

    EQ = 0
    REQ = 1
    ALL = 2
    LT = 3
    LE = 4
    GE = 5
    GT = 6
    BITS_ALL_SET = 7
    BITS_ANY_SET = 8
    BITS_ALL_NOT_SET = 9
    OVERLAPS = 10
    NEIGHBOR = 11


class Adjust(enum.IntEnum):
    """How adding months to the end of a month behaves (Tarantool's `adjust`)."""

    EXCESS = 0
    NONE = 1
    LAST = 2


@dataclasses.dataclass(frozen=True)
class Interval:
    """Tarantool's datetime.interval (MessagePack extension type 6)."""

    year: int = 0
    month: int = 0
    week: int = 0
    day: int = 0
    hour: int = 0
    minute: int = 0
    sec: int = 0
    nsec: int = 0
    adjust: Adjust = Adjust.NONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "adjust", Adjust(self.adjust))


@dataclasses.dataclass(frozen=True)
class ErrorInfo:
    """A server error object (box.error), from an error reply or a value of ext type 3."""

    type: str
    message: str
    code: int = 0
    file: str = ""
    line: int = 0
    errno: int = 0
    fields: dict = dataclasses.field(default_factory=dict)
    cause: ErrorInfo | None = None

    @property
    def trace(self) -> list[ErrorInfo]:
        """This error, then its causes, outermost first (asynctnt's ``IProtoError.trace``)."""
        out: list[ErrorInfo] = []
        e: ErrorInfo | None = self
        while e is not None:
            out.append(e)
            e = e.cause
        return out

    @property
    def error_type(self) -> str:
        """`type` under asynctnt's name (``IProtoErrorStackFrame.error_type``)."""
        return self.type

    @property
    def err_no(self) -> int:
        """`errno` under asynctnt's name."""
        return self.errno

    @classmethod
    def from_stack(cls, stack: list[dict[str, Any]]) -> ErrorInfo | None:
        """Build from the wire's list of entries, the first being the outermost."""
        cause = None
        for entry in reversed(stack):
            cause = cls(cause=cause, **entry)
        return cause


class ExtValue(NamedTuple):
    """A MessagePack extension value of a type surge does not know."""

    type: int
    data: bytes
