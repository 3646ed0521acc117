"""firm-queue, the other Python port of Solid Queue (SQLite, PostgreSQL, MySQL/MariaDB), as
bench/compare.py runs it.

Schema: ``firm.queue.schema.create_all`` in a scratch database (SQLite: a file in a temporary
directory). Enqueue: ``job.enqueue(index)``, one transaction per job; firm-queue has no bulk
enqueue, so its bulk rows are empty and the two-process backlog is enqueued one by one too.
Workers: ``firm-queue work`` (one worker, no dispatcher: like ``flask solidq work --only
worker``) with its defaults (3 threads, 0.1 s polling); two processes are two such commands. It
stops on SIGINT (``KeyboardInterrupt``), not SIGTERM.
"""

from __future__ import annotations

import functools
import shutil
import signal
import tempfile
import time
import typing as t

import firm.queue as fq
import sqlalchemy as sa
from firm.queue import schema

from bench.peers import BIN
from bench.peers import Layout
from bench.peers import Peer
from bench.peers import Scratch
from bench.peers import server_scratch
from bench.peers import stamps


@fq.job()
def stamp(index: int) -> None:
    """The compared job: record its start."""
    stamps.stamp(index)


class FirmQueuePeer(Peer):
    name = "firm-queue"
    distribution = "firm-queue"
    backends = ("sqlite", "postgres", "mysql")
    stop_signal = signal.SIGINT
    has_bulk = False
    default_settings = "3 threads (default)"

    def create(self, backend: str, server_url: str) -> Scratch:
        if backend == "sqlite":
            directory = tempfile.mkdtemp(prefix="firm-compare-")
            url = f"sqlite:///{directory}/queue.db"
            drop: t.Callable[[], None] = functools.partial(
                shutil.rmtree, directory, ignore_errors=True
            )
        else:
            url, drop = server_scratch(server_url)
        try:
            engine = sa.create_engine(url)
            schema.create_all(engine)
            engine.dispose()
        except BaseException:
            drop()
            raise
        return Scratch(backend, url, drop)

    def enqueue(self, scratch: Scratch, count: int, bulk: bool) -> float:
        if bulk:
            raise NotImplementedError("firm-queue has no bulk enqueue")
        runtime = fq.configure(database_url=scratch.url)
        try:
            started = time.perf_counter()
            for index in range(count):
                stamp.enqueue(index)
            return time.perf_counter() - started
        finally:
            runtime.reset()

    def commands(self, scratch: Scratch, layout: Layout) -> list[list[str]]:
        command = [str(BIN / "firm-queue"), "work", "--import", "bench.peers.firm_queue_peer"]
        return [command + ["--database-url", scratch.url]] * layout.processes


PEER = FirmQueuePeer()
