"""Small containers handed to handlers: query parameters and cookies."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl


class QueryParams(Mapping[str, str]):
    """An immutable multi-dict: `params["a"]` is the first value, `getlist("a")` all."""

    __slots__ = ("_dict", "_items")

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = items
        d: dict[str, str] = {}
        for k, v in items:
            d.setdefault(k, v)
        self._dict = d

    def __getitem__(self, key: str) -> str:
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def getlist(self, key: str) -> list[str]:
        """Every value of `key`, in order."""
        return [v for k, v in self._items if k == key]

    getall = getlist

    def multi_items(self) -> list[tuple[str, str]]:
        """All (key, value) pairs, repeats included."""
        return list(self._items)

    def __repr__(self) -> str:
        return f"QueryParams({self._items!r})"


def parse_query(raw: bytes) -> QueryParams:
    """Parses a query string (percent-decoded, `+` as space, blank values kept)."""
    if not raw:
        return QueryParams([])
    return QueryParams(parse_qsl(raw.decode("latin-1"), keep_blank_values=True))


def parse_cookies(headers: list[str]) -> dict[str, str]:
    """Parses Cookie headers (RFC 6265 5.4, tolerantly): pairs split on ``;``,
    names and values stripped of spaces, a quoted value unquoted; a pair without
    ``=`` or without a name is skipped; of repeated names the first is kept (a
    browser sends the most specific path first)."""
    cookies: dict[str, str] = {}
    for header in headers:
        for part in header.split(";"):
            name, sep, value = part.partition("=")
            name = name.strip()
            if not sep or not name:
                continue
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                try:
                    parsed = SimpleCookie()
                    parsed.load(f"{name}={value}")
                    value = parsed[name].value
                except (CookieError, KeyError):
                    value = value[1:-1]
            cookies.setdefault(name, value)
    return cookies
