"""A proxy that cuts the connection after a given number of reply bytes (the
idea of asyncpg's ``_testbase/fuzzer.py``): whatever the cut point, every query
either gets ITS OWN right answer or fails with a connection error, and the
connection recovers by reconnecting."""

from __future__ import annotations

import asyncio

import surge.postgres as pg
from surge.errors import ConnectError, ConnectionLostError
from surge.postgres.dsn import parse

from tests.postgres.relay import RelayProxy, ReplyHook

#: Cut points in bytes of server replies (the handshake alone is ~400 bytes).
CUTS = [450, 700, 1500, 4000, 9000]


class CuttingProxy(RelayProxy):
    """Forwards to the server; after ``budget`` reply bytes on a connection, drops it."""

    def __init__(self, host: str, port: int, budget: int) -> None:
        super().__init__(host, port)
        self.budget = budget
        self.cuts = 0

    def replies(self) -> ReplyHook:
        left = self.budget

        def cut(data: bytes) -> tuple[bytes, bool]:
            nonlocal left
            if len(data) >= left:
                self.cuts += 1
                return data[:left], True
            left -= len(data)
            return data, False

        return cut


def test_cut_anywhere_never_mismatches(arun, pg_svc):
    async def main():
        stats = []
        for budget in CUTS:
            proxy = CuttingProxy(pg_svc.host, pg_svc.port, budget)
            port = await proxy.start()
            conn = pg.Connection(
                parse(f"postgresql://postgres@127.0.0.1:{port}/postgres"),
                retry_connect=False,
            )
            ok = lost = 0
            try:
                for _ in range(4):
                    got = await asyncio.gather(
                        *(
                            conn.fetchrow("SELECT $1::int AS i, repeat('y', $1) AS s", i)
                            for i in range(60)
                        ),
                        return_exceptions=True,
                    )
                    for i, r in enumerate(got):
                        if isinstance(r, BaseException):
                            assert isinstance(r, ConnectionLostError | ConnectError), r
                            lost += 1
                        else:
                            # Its own answer, never a neighbour's.
                            assert (r["i"], r["s"]) == (i, "y" * i)
                            ok += 1
                    if budget < 600:
                        # The handshake itself is cut: never connects, fails cleanly.
                        continue
            finally:
                await conn.close()
                proxy.close()
            assert ok + lost == 240
            if budget > 600:
                assert ok > 0  # every connection gets somewhere before its cut
            assert proxy.cuts > 0
            stats.append((budget, ok, lost, proxy.cuts))
        # Later cut points let more through.
        assert stats[0][1] <= stats[-2][1]

    arun(main(), timeout=30)
