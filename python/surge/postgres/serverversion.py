"""`ServerVersion`: the server's version as asyncpg gives it, from the
``server_version`` parameter the server reports at connect."""

from __future__ import annotations

import re
from typing import NamedTuple


class ServerVersion(NamedTuple):
    """asyncpg's shape: since PostgreSQL 10 the second number is the minor
    release, reported as ``micro`` (15.4 is (15, 0, 4, 'final', 0))."""

    major: int
    minor: int
    micro: int
    releaselevel: str
    serial: int


_VERSION = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:(devel|alpha|beta|rc)(\d+)?)?")


def server_version(text: str) -> ServerVersion:
    """Parse ``"15.4 (Debian 15.4-1)"``, ``"9.6.24"``, ``"17beta1"``."""
    m = _VERSION.match(text.strip())
    if m is None:
        return ServerVersion(0, 0, 0, "final", 0)
    major, second, third, level, serial = m.groups()
    nums = [int(major), int(second or 0), int(third or 0)]
    if nums[0] >= 10:  # two-part versions: the second number is the minor release
        nums = [nums[0], 0, nums[1]]
    return ServerVersion(nums[0], nums[1], nums[2], level or "final", int(serial or 0))
