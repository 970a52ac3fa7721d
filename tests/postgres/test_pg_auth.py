"""Authentication against the real server: md5, SCRAM-SHA-256 and cleartext
roles (pg_hba lines from `services.POSTGRES_PASSWORD_ROLES`), wrong and
missing passwords."""

from __future__ import annotations

import pytest
import surge.postgres as pg
from surge.errors import InterfaceError


@pytest.mark.parametrize("role", ["surge_md5", "surge_scram", "surge_password"])
def test_password_auth(arun, pg_svc, pg_password, role):
    async def main():
        url = f"postgresql://{role}:{pg_password}@{pg_svc.host}:{pg_svc.port}/postgres"
        conn = await pg.connect(url)
        try:
            assert await conn.fetchval("SELECT current_user") == role
        finally:
            await conn.close()
        # The stored password really is of the kind the hba method implies.
        admin = await pg.connect(pg_svc.url)
        try:
            stored = await admin.fetchval(
                "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role
            )
        finally:
            await admin.close()
        assert stored.startswith("md5" if role == "surge_md5" else "SCRAM-SHA-256$")

    arun(main())


@pytest.mark.parametrize("role", ["surge_md5", "surge_scram", "surge_password"])
def test_wrong_password(arun, pg_svc, role):
    async def main():
        with pytest.raises(pg.InvalidPasswordError):
            await pg.connect(
                host=pg_svc.host, port=pg_svc.port, user=role, password="nope", database="postgres"
            )
        with pytest.raises(InterfaceError, match="password"):
            await pg.connect(host=pg_svc.host, port=pg_svc.port, user=role, database="postgres")

    arun(main())


def test_unknown_database(arun, pg_svc):
    async def main():
        with pytest.raises(pg.InvalidCatalogNameError):
            await pg.connect(host=pg_svc.host, port=pg_svc.port, user="postgres", database="nope")

    arun(main())
