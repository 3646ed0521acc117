"""RQ (Redis), as bench/compare.py runs it.

Store: a dedicated Redis database number (``--redis-db``, 13 unless told), flushed before and
after each run. Enqueue: ``Queue.enqueue(function, index)`` per job, and for bulk
``Queue.enqueue_many`` of 1,000 ``Queue.prepare_data`` a call (one pipeline). Workers: ``rq
worker`` with its defaults (the forking ``rq.Worker``: a work horse process per job); two
processes are two such commands.
"""

from __future__ import annotations

import time

from redis import Redis
from rq import Queue

from bench.peers import BATCH
from bench.peers import BIN
from bench.peers import Layout
from bench.peers import Peer
from bench.peers import Scratch
from bench.peers import stamps

QUEUE = "compare"
SERVER = "redis://127.0.0.1:6379"
DATABASE = 13


def stamp(index: int) -> None:
    """The compared job: record its start."""
    stamps.stamp(index)


def reachable(server: str = SERVER) -> str | None:
    """None when Redis answers at ``server``, else why not."""
    try:
        with Redis.from_url(server, socket_connect_timeout=2) as connection:
            connection.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "not measured"
        return f"{exc.__class__.__name__}: {exc}"
    return None


class RQPeer(Peer):
    name = "rq"
    distribution = "rq"
    backends = ("redis",)
    default_settings = "fork per job (default)"
    database = DATABASE

    def create(self, backend: str, server_url: str) -> Scratch:
        url = f"{server_url or SERVER}/{self.database}"
        _flush(url)
        return Scratch(backend, url, lambda: _flush(url))

    def enqueue(self, scratch: Scratch, count: int, bulk: bool) -> float:
        with Redis.from_url(scratch.url) as connection:
            queue = Queue(QUEUE, connection=connection)
            started = time.perf_counter()
            if bulk:
                for first in range(0, count, BATCH):
                    last = min(count, first + BATCH)
                    queue.enqueue_many(
                        [Queue.prepare_data(stamp, args=(index,)) for index in range(first, last)]
                    )
            else:
                for index in range(count):
                    queue.enqueue(stamp, index)
            return time.perf_counter() - started

    def commands(self, scratch: Scratch, layout: Layout) -> list[list[str]]:
        command = [str(BIN / "rq"), "worker", "--url", scratch.url, QUEUE]
        return [command] * layout.processes


def _flush(url: str) -> None:
    with Redis.from_url(url) as connection:
        connection.flushdb()


PEER = RQPeer()
