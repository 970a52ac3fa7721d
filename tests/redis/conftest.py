"""Fixtures for the Redis driver tests: a real redis-server, both loops."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from surge import services

_db_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def redis_svc() -> Iterator[services.Service]:
    """A Redis (no persistence) for the whole session."""
    with services.redis() as svc:
        yield svc


@pytest.fixture
def url(redis_svc: services.Service) -> str:
    """The server's URL with a database of the test's own (tests do not see each other's keys)."""
    return f"redis://{redis_svc.host}:{redis_svc.port}/{next(_db_numbers) % 16}"
