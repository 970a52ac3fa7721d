"""Fixtures for the PostgreSQL driver tests: a real PostgreSQL 15 (trust auth for
``postgres``, password auth for the roles in `services.POSTGRES_PASSWORD_ROLES`),
each test on uvloop and on plain asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from surge import services

#: The password every test role gets.
PASSWORD = "s3cret-pw"


@pytest.fixture(scope="session")
def pg_svc() -> Iterator[services.Service]:
    """A PostgreSQL for the whole session, with the password roles created."""
    with services.postgres() as svc:
        asyncio.run(_create_roles(svc.url))
        yield svc


async def _create_roles(url: str) -> None:
    import surge.postgres as pg

    conn = await pg.connect(url)
    try:
        for role in services.POSTGRES_PASSWORD_ROLES:
            # md5 auth needs an md5-stored password; the others take SCRAM's.
            enc = "md5" if role == "surge_md5" else "scram-sha-256"
            await conn.execute(
                f"SET password_encryption = '{enc}'; "
                f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'; "
                f"GRANT ALL ON SCHEMA public TO {role}"
            )
    finally:
        await conn.close()


@pytest.fixture
def pg_password() -> str:
    """The password of the roles in `services.POSTGRES_PASSWORD_ROLES`."""
    return PASSWORD


@pytest.fixture
def dsn(pg_svc: services.Service) -> str:
    """The trust-auth DSN of the test server."""
    return pg_svc.url
