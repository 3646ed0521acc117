"""flask-solidq, as bench/compare.py runs it: the reference the other queues are compared with.

Workers: ``flask --app bench.peers.solidq:create_app solidq work --only worker`` (the dispatcher
and scheduler have nothing to do with a backlog of immediate jobs, as in bench/throughput.py),
with its defaults (3 threads, one process; ``--processes 2`` for two) and with the README's best
measured setting for no-op jobs, 20 threads a process (its Performance section: more threads
make each claim take more jobs). Bulk enqueues are ``perform_all_later`` of 1,000 jobs.
"""

from __future__ import annotations

import json
import sys
import time

from flask import Flask

from bench import app as bench_app
from bench import common
from bench.peers import BATCH
from bench.peers import Layout
from bench.peers import Peer
from bench.peers import Scratch
from bench.peers import stamps

APP = "bench.peers.solidq:create_app"
BEST_THREADS = 20


@common.solidq.job(name="bench.compare.stamp")
def stamp(index: int) -> None:
    """The compared job: record its start."""
    stamps.stamp(index)


def create_app() -> Flask:
    """The worker's app: bench/app.py's, with this module's job registered (by importing it)."""
    return bench_app.create_app()


class SolidQ(Peer):
    name = "flask-solidq"
    distribution = "flask-solidq"
    backends = ("sqlite", "postgres", "mysql")
    default_settings = "3 threads (default)"

    def layouts(self) -> list[Layout]:
        best = f"{BEST_THREADS} threads"
        return super().layouts() + [
            Layout(1, best, "bulk", best=True, threads=BEST_THREADS),
            Layout(2, best, "bulk", best=True, threads=BEST_THREADS),
        ]

    def create(self, backend: str, server_url: str) -> Scratch:
        url, drop = common.scratch_database(backend, server_url)
        return Scratch(backend, url, drop)

    def enqueue(self, scratch: Scratch, count: int, bulk: bool) -> float:
        app = common.create_app(scratch.url)
        with app.app_context():
            # Connected before the clock starts, as the peers' enqueues are.
            app.extensions["solidq"].engine.connect().close()
            started = time.perf_counter()
            if bulk:
                for first in range(0, count, BATCH):
                    jobs = [stamp.new(index) for index in range(first, min(count, first + BATCH))]
                    common.solidq.perform_all_later(jobs)
            else:
                for index in range(count):
                    stamp.perform_later(index)
            elapsed = time.perf_counter() - started
            app.extensions["solidq"].engine.dispose()
        return elapsed

    def commands(self, scratch: Scratch, layout: Layout) -> list[list[str]]:
        command = [sys.executable, "-m", "flask", "--app", APP, "solidq", "work"]
        command += ["--only", "worker"]
        if layout.processes != 1:
            command += ["--processes", str(layout.processes)]
        if layout.threads is not None:
            command += ["--threads", str(layout.threads)]
        return [command]

    def environment(self, scratch: Scratch) -> dict[str, str]:
        return {
            "SOLIDQ_BENCH_DATABASE_URL": scratch.url,
            "SOLIDQ_BENCH_CONFIG": json.dumps({}),
        }


PEER = SolidQ()
