"""The Python values of PostgreSQL's types, and the names of the built-in ones.

The classes have asyncpg's names, attributes, equality and reprs (`Range`,
`Point`, `Box`, `Line`, `LineSegment`, `Path`, `Polygon`, `Circle`,
`BitString`), so code written against ``asyncpg.types`` reads the same values.
Point, Box, Line, LineSegment and Circle are tuples, as in asyncpg. Values of
asyncpg's own classes are accepted as parameters too.

The table of built-in types lives in Rust (``surge_proto::pgwire::types::
table``), the one place an oid is written; `TYPES` here is read from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, SupportsFloat

from surge._core import pg_types
from surge.postgres.serverversion import ServerVersion

#: asyncpg.types' names; `surge.postgres` exports them too, as asyncpg's package
#: does (its `__all__` starts from this one). The built-in type table (`TYPES`,
#: `ARRAYS`, `BuiltinType`, `type_oid`, `type_name`) is surge's own and not in it.
__all__: tuple[str, ...] = (
    "Attribute",
    "BitString",
    "Box",
    "Circle",
    "Line",
    "LineSegment",
    "Path",
    "Point",
    "Polygon",
    "Range",
    "ServerVersion",
    "Type",
)


class Type(NamedTuple):
    """A PostgreSQL type as a parameter or column has it (asyncpg's fields:
    ``kind`` is scalar, array, composite, range or multirange)."""

    oid: int
    name: str
    kind: str = "scalar"
    schema: str = "pg_catalog"


class Attribute(NamedTuple):
    """A result column: its name and type."""

    name: str
    type: Type


class BuiltinType(NamedTuple):
    """A row of the built-in type table."""

    oid: int
    name: str
    #: Oid of the array of this type (0: none).
    array_oid: int
    #: The codec's kind (``"Int4"``, ``"Range"``, ``"AsText"`` ...).
    kind: str
    #: A range's subtype, a multirange's range or a vector's element (else 0).
    inner: int
    #: False for the types that go as text (money, reg*, tsvector ...).
    binary: bool


#: oid -> the built-in type (from the native table).
TYPES: dict[int, BuiltinType] = {row[0]: BuiltinType(*row) for row in pg_types()}
#: Array type oid -> element type oid, for the built-in types.
ARRAYS: dict[int, int] = {t.array_oid: t.oid for t in TYPES.values() if t.array_oid}


def type_oid(name: str) -> int:
    """The oid of the built-in type ``name`` (KeyError if it is not built in)."""
    for t in TYPES.values():
        if t.name == name:
            return t.oid
    raise KeyError(name)


def type_name(oid: int) -> str:
    """The type's name (``int4``, ``_text`` for arrays), or ``oid:N`` if not built in."""
    t = TYPES.get(oid)
    if t is not None:
        return t.name
    elem = ARRAYS.get(oid)
    if elem is not None:
        return "_" + TYPES[elem].name
    return f"oid:{oid}"


# -- ranges ---------------------------------------------------------------------------


class Range:
    """A range value: bounds (None: infinite), their inclusivity, or empty."""

    __slots__ = ("_empty", "_lower", "_lower_inc", "_upper", "_upper_inc")

    def __init__(
        self,
        lower: Any = None,
        upper: Any = None,
        *,
        lower_inc: bool = True,
        upper_inc: bool = False,
        empty: bool = False,
    ) -> None:
        self._empty = empty
        if empty:
            self._lower = self._upper = None
            self._lower_inc = self._upper_inc = False
            return
        self._lower = lower
        self._upper = upper
        # An infinite bound is never inclusive (PostgreSQL's rule too).
        self._lower_inc = lower is not None and lower_inc
        self._upper_inc = upper is not None and upper_inc

    @property
    def lower(self) -> Any:
        """The lower bound, None when infinite or empty."""
        return self._lower

    @property
    def upper(self) -> Any:
        """The upper bound, None when infinite or empty."""
        return self._upper

    @property
    def lower_inc(self) -> bool:
        """True when the lower bound is in the range."""
        return self._lower_inc

    @property
    def upper_inc(self) -> bool:
        """True when the upper bound is in the range."""
        return self._upper_inc

    @property
    def lower_inf(self) -> bool:
        """True when the range has no lower bound."""
        return self._lower is None and not self._empty

    @property
    def upper_inf(self) -> bool:
        """True when the range has no upper bound."""
        return self._upper is None and not self._empty

    @property
    def isempty(self) -> bool:
        """True for the empty range."""
        return self._empty

    def _key(self) -> tuple[Any, Any, bool, bool, bool]:
        return (self._lower, self._upper, self._lower_inc, self._upper_inc, self._empty)

    def _lower_within(self, other: Range) -> bool:
        if other._lower is None:
            return True
        if self._lower is None:
            return False
        if self._lower != other._lower:
            return bool(self._lower > other._lower)
        return other._lower_inc or not self._lower_inc

    def _upper_within(self, other: Range) -> bool:
        if other._upper is None:
            return True
        if self._upper is None:
            return False
        if self._upper != other._upper:
            return bool(self._upper < other._upper)
        return other._upper_inc or not self._upper_inc

    def issubset(self, other: Range) -> bool:
        """True when every value of this range is in ``other``."""
        if self._empty:
            return True
        if other._empty:
            return False
        return self._lower_within(other) and self._upper_within(other)

    def issuperset(self, other: Range) -> bool:
        """True when every value of ``other`` is in this range."""
        return other.issubset(self)

    def __bool__(self) -> bool:
        return not self._empty

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Range):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self._empty:
            return "<Range empty>"
        lo = "(" if self._lower is None or not self._lower_inc else "["
        if self._lower is not None:
            lo += repr(self._lower)
        hi = "" if self._upper is None else repr(self._upper)
        hi += ")" if self._upper is None or not self._upper_inc else "]"
        return f"<Range {lo}, {hi}>"

    __str__ = __repr__


# -- geometric types --------------------------------------------------------------------


class _TupleRepr(tuple):  # type: ignore[type-arg]
    __slots__ = ()

    def __repr__(self) -> str:
        return f"{type(self).__module__}.{type(self).__name__}({tuple.__repr__(self)})"


class Point(_TupleRepr):
    """A point: ``(x, y)``."""

    __slots__ = ()

    def __new__(cls, x: SupportsFloat | str, y: SupportsFloat | str) -> Point:
        return super().__new__(cls, (float(x), float(y)))

    @property
    def x(self) -> float:
        """The x coordinate."""
        return float(self[0])

    @property
    def y(self) -> float:
        """The y coordinate."""
        return float(self[1])


class Box(_TupleRepr):
    """A box: ``(high, low)`` corners (PostgreSQL puts the upper right first)."""

    __slots__ = ()

    def __new__(cls, high: Sequence[float], low: Sequence[float]) -> Box:
        return super().__new__(cls, (Point(*high), Point(*low)))

    @property
    def high(self) -> Point:
        """The upper right corner."""
        return self[0]  # type: ignore[no-any-return]

    @property
    def low(self) -> Point:
        """The lower left corner."""
        return self[1]  # type: ignore[no-any-return]


class Line(tuple):  # type: ignore[type-arg]
    """A line ``Ax + By + C = 0``: ``(A, B, C)``."""

    __slots__ = ()

    def __new__(cls, A: float, B: float, C: float) -> Line:
        return super().__new__(cls, (A, B, C))

    @property
    def A(self) -> float:
        """The x coefficient."""
        return self[0]  # type: ignore[no-any-return]

    @property
    def B(self) -> float:
        """The y coefficient."""
        return self[1]  # type: ignore[no-any-return]

    @property
    def C(self) -> float:
        """The constant."""
        return self[2]  # type: ignore[no-any-return]


class LineSegment(_TupleRepr):
    """A line segment: ``(p1, p2)``."""

    __slots__ = ()

    def __new__(cls, p1: Sequence[float], p2: Sequence[float]) -> LineSegment:
        return super().__new__(cls, (Point(*p1), Point(*p2)))

    @property
    def p1(self) -> Point:
        """The first end."""
        return self[0]  # type: ignore[no-any-return]

    @property
    def p2(self) -> Point:
        """The second end."""
        return self[1]  # type: ignore[no-any-return]


class Path:
    """A path: points, open or closed."""

    __slots__ = ("_is_closed", "points")

    def __init__(self, *points: Sequence[float], is_closed: bool = False) -> None:
        self.points: tuple[Point, ...] = tuple(Point(*p) for p in points)
        self._is_closed = is_closed

    @property
    def is_closed(self) -> bool:
        """True for a closed path (a polygon's outline)."""
        return self._is_closed

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Path):
            return NotImplemented
        return self.points == other.points and self._is_closed == other._is_closed

    def __hash__(self) -> int:
        return hash((self.points, self._is_closed))

    def __iter__(self) -> Iterator[Point]:
        return iter(self.points)

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, i: Any) -> Any:
        return self.points[i]

    def __contains__(self, point: object) -> bool:
        return point in self.points

    def __repr__(self) -> str:
        pts = ", ".join(repr(tuple(p)) for p in self.points)
        return f"{type(self).__name__}({pts}, is_closed={self._is_closed})"


class Polygon(Path):
    """A polygon: a closed path."""

    __slots__ = ()

    def __init__(self, *points: Sequence[float]) -> None:
        super().__init__(*points, is_closed=True)

    def __repr__(self) -> str:
        return f"Polygon({', '.join(repr(tuple(p)) for p in self.points)})"


class Circle(tuple):  # type: ignore[type-arg]
    """A circle: ``(center, radius)`` (the center as given; a decoded circle's
    is an ``(x, y)`` tuple, as asyncpg's)."""

    __slots__ = ()

    def __new__(cls, center: Sequence[float], radius: float) -> Circle:
        return super().__new__(cls, (center, radius))

    @property
    def center(self) -> Sequence[float]:
        """The center."""
        return self[0]  # type: ignore[no-any-return]

    @property
    def radius(self) -> float:
        """The radius."""
        return self[1]  # type: ignore[no-any-return]


# -- bit strings ----------------------------------------------------------------------


class BitString:
    """A bit / varbit value: ``BitString("1010 01")`` (spaces ignored)."""

    __slots__ = ("_bitlength", "_bytes")

    def __init__(self, bitstring: str | None = None) -> None:
        bits = [c for c in (bitstring or "") if c != " "]
        if any(c not in "01" for c in bits):
            raise ValueError(f"a bit string holds 0, 1 and spaces, not {bitstring!r}")
        n = len(bits)
        value = int("".join(bits), 2) << (-n % 8) if n else 0
        self._bytes = value.to_bytes((n + 7) // 8, "big")
        self._bitlength = n

    @classmethod
    def frombytes(cls, bytes_: bytes | None = None, bitlength: int | None = None) -> BitString:
        """The first ``bitlength`` bits of ``bytes_`` (all of them by default)."""
        data = bytes(bytes_ or b"")
        n = len(data) * 8 if bitlength is None else bitlength
        if bitlength is not None and bytes_ is None:
            data = bytes((n + 7) // 8)
        if (n + 7) // 8 != len(data):
            raise ValueError(f"{n} bits do not fit {len(data)} bytes")
        out = cls()
        out._bytes = data
        out._bitlength = n
        return out

    @property
    def bytes(self) -> bytes:
        """The bits, padded with zeros to whole bytes."""
        return self._bytes

    def as_string(self) -> str:
        """The bits as 0s and 1s, in groups of four."""
        s = "".join(str(self[i]) for i in range(self._bitlength))
        return " ".join(s[i : i + 4] for i in range(0, len(s), 4))

    def to_int(self, bitorder: str = "big", *, signed: bool = False) -> int:
        """The bits as an int (``bitorder="little"``: the last bit is the highest)."""
        x = int.from_bytes(self._bytes, "big") >> (-self._bitlength % 8)
        if bitorder == "little":
            x = int(format(x, f"0{self._bitlength}b")[::-1] or "0", 2)
        elif bitorder != "big":
            raise ValueError("bitorder is 'big' or 'little'")
        if signed and self._bitlength and x >> (self._bitlength - 1):
            x -= 1 << self._bitlength
        return x

    @classmethod
    def from_int(
        cls, x: int, length: int, bitorder: str = "big", *, signed: bool = False
    ) -> BitString:
        """``length`` bits of ``x`` (two's complement when ``signed``)."""
        if length < 0:
            raise ValueError("length must be non-negative")
        if x < 0:
            if not signed:
                raise OverflowError("can't convert negative int to unsigned")
            if x < -(1 << max(length - 1, 0)):
                raise OverflowError("int too big to convert")
            x &= (1 << length) - 1
        elif x.bit_length() > length:
            raise OverflowError("int too big to convert")
        if bitorder == "little":
            x = int(format(x, f"0{length}b")[::-1] or "0", 2)
        elif bitorder != "big":
            raise ValueError("bitorder is 'big' or 'little'")
        return cls.frombytes((x << (-length % 8)).to_bytes((length + 7) // 8, "big"), length)

    def __len__(self) -> int:
        return self._bitlength

    def __getitem__(self, i: int) -> int:
        if isinstance(i, slice):
            raise NotImplementedError("BitString does not support slices")
        if i < 0:
            i += self._bitlength
        if not 0 <= i < self._bitlength:
            raise IndexError("index out of range")
        return (self._bytes[i // 8] >> (7 - i % 8)) & 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BitString):
            return NotImplemented
        return self._bytes == other._bytes and self._bitlength == other._bitlength

    def __hash__(self) -> int:
        return hash((self._bytes, self._bitlength))

    def __repr__(self) -> str:
        return f"<BitString {self.as_string()}>"

    __str__ = __repr__
