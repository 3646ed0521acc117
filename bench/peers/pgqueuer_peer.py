"""PgQueuer (PostgreSQL only), as bench/compare.py runs it.

Schema: ``Queries.install()`` in a scratch database. Enqueue: ``SyncQueries`` on an autocommit
psycopg connection (its synchronous API, what a Flask view would call): ``enqueue(entrypoint,
payload)`` per job, and for bulk the list form with 1,000 jobs a call. Workers: ``python -m
bench.peers.pgqueuer_peer``, which runs ``pgqueuer.run(create_pgqueuer)`` ("``pgq run`` without
the CLI": the same defaults, batch size 10 and no concurrency limit, on uvloop) on an asyncpg
connection, as in PgQueuer's quickstart; two processes are two such commands. Not ``pgq run``
itself: with typer 0.29 it fails before starting (``AttributeError: 'str' object has no
attribute 'name'``: the default ``--log-level`` reaches its logging set-up as a string).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import typing as t

import asyncpg
import pgqueuer
import psycopg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.db import SyncPsycopgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries
from pgqueuer.queries import SyncQueries

from bench.peers import BATCH
from bench.peers import Layout
from bench.peers import Peer
from bench.peers import Scratch
from bench.peers import libpq_dsn
from bench.peers import server_scratch
from bench.peers import stamps

ENTRYPOINT = "compare_stamp"
DSN_VARIABLE = "SOLIDQ_COMPARE_PGQUEUER_DSN"


@contextlib.asynccontextmanager
async def create_pgqueuer() -> t.AsyncIterator[PgQueuer]:
    """The worker's factory: one asyncpg connection, one entrypoint. (PgQueuer 1.6 wants an
    async context manager; its README's ``async def main() -> PgQueuer`` is refused.)"""
    connection = await asyncpg.connect(os.environ[DSN_VARIABLE])
    try:
        pgq = PgQueuer(AsyncpgDriver(connection))

        @pgq.entrypoint(ENTRYPOINT)
        async def stamp(job: Job) -> None:
            stamps.stamp(int(job.payload or b"-1"))

        yield pgq
    finally:
        await connection.close()


async def _install(dsn: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        await Queries(AsyncpgDriver(connection)).install()
    finally:
        await connection.close()


class PgQueuerPeer(Peer):
    name = "pgqueuer"
    distribution = "pgqueuer"
    backends = ("postgres",)
    default_settings = "batch 10 (default)"

    def create(self, backend: str, server_url: str) -> Scratch:
        url, drop = server_scratch(server_url)
        dsn = libpq_dsn(url)
        try:
            asyncio.run(_install(dsn))
        except BaseException:
            drop()
            raise
        return Scratch(backend, dsn, drop)

    def enqueue(self, scratch: Scratch, count: int, bulk: bool) -> float:
        with psycopg.connect(scratch.url, autocommit=True) as connection:
            queries = SyncQueries(SyncPsycopgDriver(connection))
            started = time.perf_counter()
            if bulk:
                for first in range(0, count, BATCH):
                    indexes = range(first, min(count, first + BATCH))
                    queries.enqueue(
                        [ENTRYPOINT] * len(indexes),
                        [str(index).encode() for index in indexes],
                        [0] * len(indexes),
                    )
            else:
                for index in range(count):
                    queries.enqueue(ENTRYPOINT, str(index).encode())
            return time.perf_counter() - started

    def commands(self, scratch: Scratch, layout: Layout) -> list[list[str]]:
        return [[sys.executable, "-m", "bench.peers.pgqueuer_peer"]] * layout.processes

    def environment(self, scratch: Scratch) -> dict[str, str]:
        return {DSN_VARIABLE: scratch.url}


PEER = PgQueuerPeer()


def work() -> None:
    """What ``pgq run bench.peers.pgqueuer_peer:create_pgqueuer`` does: INFO logging, then the
    worker on uvloop until SIGTERM or SIGINT."""
    from pgqueuer.core import logconfig

    logconfig.setup_fancy_logger(logconfig.LogLevel.INFO)
    try:
        import uvloop
    except ImportError:
        asyncio.run(pgqueuer.run(create_pgqueuer))
    else:
        uvloop.run(pgqueuer.run(create_pgqueuer))


if __name__ == "__main__":
    work()
