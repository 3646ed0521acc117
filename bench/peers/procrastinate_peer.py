"""procrastinate (PostgreSQL only), as bench/compare.py runs it.

Schema: ``schema_manager.apply_schema()`` in a scratch database. Enqueue: the synchronous API
(``App.open()``, then ``task.defer(...)`` per job and ``task.batch_defer(...)`` with 1,000 jobs
a call). Workers: ``procrastinate --app bench.peers.procrastinate_peer.app worker`` with its
defaults (concurrency 1, LISTEN/NOTIFY, 5 s polling fallback); two processes are two such
commands.
"""

from __future__ import annotations

import os
import time

from procrastinate import App
from procrastinate import PsycopgConnector
from procrastinate.types import JSONDict

from bench.peers import BATCH
from bench.peers import BIN
from bench.peers import Layout
from bench.peers import Peer
from bench.peers import Scratch
from bench.peers import libpq_dsn
from bench.peers import server_scratch
from bench.peers import stamps

DSN_VARIABLE = "SOLIDQ_COMPARE_PROCRASTINATE_DSN"

#: The worker's app: its connector reads the scratch database's DSN from the environment; the
#: benchmark's process swaps in a connector of its own (``replace_connector``).
app = App(connector=PsycopgConnector(conninfo=os.environ.get(DSN_VARIABLE, "")))


@app.task(name="compare_stamp")
def stamp(index: int) -> None:
    """The compared job: record its start."""
    stamps.stamp(index)


class ProcrastinatePeer(Peer):
    name = "procrastinate"
    distribution = "procrastinate"
    backends = ("postgres",)
    default_settings = "concurrency 1 (default)"

    def create(self, backend: str, server_url: str) -> Scratch:
        url, drop = server_scratch(server_url)
        dsn = libpq_dsn(url)
        try:
            with app.replace_connector(PsycopgConnector(conninfo=dsn)):
                app.open()
                try:
                    app.schema_manager.apply_schema()
                finally:
                    app.close()
        except BaseException:
            drop()
            raise
        return Scratch(backend, dsn, drop)

    def enqueue(self, scratch: Scratch, count: int, bulk: bool) -> float:
        with app.replace_connector(PsycopgConnector(conninfo=scratch.url)):
            app.open()
            try:
                started = time.perf_counter()
                if bulk:
                    for first in range(0, count, BATCH):
                        last = min(count, first + BATCH)
                        batch: list[JSONDict] = [{"index": i} for i in range(first, last)]
                        stamp.batch_defer(*batch)
                else:
                    for index in range(count):
                        stamp.defer(index=index)
                return time.perf_counter() - started
            finally:
                app.close()

    def commands(self, scratch: Scratch, layout: Layout) -> list[list[str]]:
        command = [str(BIN / "procrastinate"), "--app", "bench.peers.procrastinate_peer.app"]
        return [command + ["worker"]] * layout.processes

    def environment(self, scratch: Scratch) -> dict[str, str]:
        return {DSN_VARIABLE: scratch.url}


PEER = ProcrastinatePeer()
