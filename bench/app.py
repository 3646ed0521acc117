"""The app the worker benchmarks run ``flask solidq work`` with (throughput.py, latency.py).

    SOLIDQ_BENCH_DATABASE_URL=sqlite:////tmp/x/bench.db \\
        flask --app bench.app:create_app solidq work

Environment:

* ``SOLIDQ_BENCH_DATABASE_URL`` (required): the queue's database.
* ``SOLIDQ_BENCH_CONFIG``: a JSON object of extra app config, e.g.
  ``{"SOLIDQ_SHUTDOWN_TIMEOUT": 5}``.
* ``SOLIDQ_BENCH_START_LOG``: a file to which every worker process appends ``<job id> <time>``
  as each job starts (``bench/latency.py --steady``).
* ``SOLIDQ_BENCH_RUN_LOG``: a file to which every worker process appends the id of each job it
  starts, one line per run, so a benchmark can check that every job ran exactly once.
* ``SOLIDQ_BENCH_PROFILE``: a path prefix: every forked worker process profiles its threads
  into files named from it (see :mod:`bench.worker_profile`).

Jobs (the benchmark scripts import this module, so the stored names and import paths match the
worker's): ``bench.noop`` (from :mod:`bench.common`), ``bench.record_start`` (stores when it
started in ``bench_starts``), ``bench.enqueue_probe`` (enqueues a ``record_start`` from inside
the worker and stores when that enqueue returned in ``bench_probes``) and ``bench.batch_done``
(a batch's callback: stores when it started in ``bench_batch_callbacks``). The tables are
created by the benchmark with :func:`create_tables`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import typing as t

import sqlalchemy as sa
from flask import Flask
from flask import current_app

from bench import common
from flask_solidq import current_job
from flask_solidq import signals
from flask_solidq.logging import line_writer
from flask_solidq.storage import db as solidq_db

noop = common.noop

metadata = sa.MetaData()

JobId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

#: One row per run of ``bench.record_start``: its job id and ``time.time()`` when it started.
starts = sa.Table(
    "bench_starts",
    metadata,
    sa.Column("job_id", JobId, nullable=False, index=True),
    sa.Column("started_at", sa.Double(), nullable=False),
)

#: One row per run of ``bench.enqueue_probe``: the probe's id, the id of the ``record_start``
#: it enqueued, and ``time.time()`` when that ``perform_later`` returned.
probes = sa.Table(
    "bench_probes",
    metadata,
    sa.Column("probe_id", JobId, nullable=False, index=True),
    sa.Column("job_id", JobId, nullable=False),
    sa.Column("enqueued_at", sa.Double(), nullable=False),
)


#: One row per run of ``bench.batch_done``: the batch's id and ``time.time()`` when the
#: callback started.
batch_callbacks = sa.Table(
    "bench_batch_callbacks",
    metadata,
    sa.Column("batch_id", JobId, nullable=False, index=True),
    sa.Column("started_at", sa.Double(), nullable=False),
)


def create_tables(engine: sa.Engine) -> None:
    """Create the benchmarks' own tables (before any worker starts)."""
    metadata.create_all(engine)


def _engine() -> sa.Engine:
    return t.cast(sa.Engine, current_app.extensions["solidq"].engine)


@common.solidq.job(name="bench.record_start")
def record_start() -> None:
    """Store ``time.time()`` at the moment the job starts, under its own job id."""
    started_at = time.time()
    with solidq_db.write(_engine()) as connection:
        connection.execute(
            starts.insert(), {"job_id": current_job.provider_job_id, "started_at": started_at}
        )


@common.solidq.job(name="bench.enqueue_probe")
def enqueue_probe() -> None:
    """Enqueue a ``record_start`` from inside the worker process (so the worker's in-process
    wake-up applies) and store when that enqueue returned."""
    job = record_start.perform_later()
    enqueued_at = time.time()
    with solidq_db.write(_engine()) as connection:
        connection.execute(
            probes.insert(),
            {
                "probe_id": current_job.provider_job_id,
                "job_id": job.provider_job_id,
                "enqueued_at": enqueued_at,
            },
        )


@common.solidq.job(name="bench.batch_done")
def batch_done(batch: t.Any) -> None:
    """A batch's callback: store ``time.time()`` at its start, under the batch's id."""
    started_at = time.time()
    with solidq_db.write(_engine()) as connection:
        connection.execute(
            batch_callbacks.insert(), {"batch_id": batch.id, "started_at": started_at}
        )


_run_log: dict[tuple[int, str], int] = {}
_run_log_lock = threading.Lock()


def _log_run(sender: t.Any, job: t.Any = None, **_: t.Any) -> None:
    """Append the id of a job about to run to ``SOLIDQ_BENCH_RUN_LOG``, through a
    :class:`~flask_solidq.logging.line_writer.LineWriter` on an ``O_APPEND`` descriptor: the
    ids of a few milliseconds go in one ``write`` (whole lines: the lines of concurrent
    processes never interleave), as the worker's log lines do. A ``write`` per job, each
    handing the GIL over, cost the measured worker 5-40 µs of CPU per job."""
    _run_log_writer().write(f"{job.provider_job_id}\n".encode())


def _run_log_writer() -> line_writer.LineWriter:
    """This process's writer of the run log. Its pending ids are written before a fork (the
    writer's own hook) and when logging shuts down, as a forked worker does before it exits
    (:class:`_RunLogFlush`)."""
    pid = os.getpid()
    writer = _run_log_writers.get(pid)
    if writer is None:
        descriptor = _descriptor("SOLIDQ_BENCH_RUN_LOG")
        with _run_log_lock:
            writer = _run_log_writers.get(pid)
            if writer is None:
                writer = _run_log_writers[pid] = line_writer.LineWriter(descriptor)
                _run_log_flushes.append(_RunLogFlush(writer))
    return writer


class _RunLogFlush(logging.Handler):
    """Attached to no logger: a handler only so that ``logging.shutdown()``, which a forked
    worker calls before ``os._exit``, writes the run log's pending ids."""

    def __init__(self, writer: line_writer.LineWriter) -> None:
        super().__init__()
        self.writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        pass

    def flush(self) -> None:
        self.writer.close()


_run_log_writers: dict[int, line_writer.LineWriter] = {}
_run_log_flushes: list[_RunLogFlush] = []  # logging holds its handlers weakly


def _log_start(sender: t.Any, job: t.Any = None, **_: t.Any) -> None:
    """Append ``<job id> <time.time()>`` of a job about to run to ``SOLIDQ_BENCH_START_LOG``:
    a start time with no write to the database (at a thousand jobs a second, a row per start
    would be a load of its own on the server being measured)."""
    line = f"{job.provider_job_id} {time.time():.6f}\n"
    os.write(_descriptor("SOLIDQ_BENCH_START_LOG"), line.encode())


def _descriptor(variable: str) -> int:
    """This process's ``O_APPEND`` descriptor of the file named by ``variable``."""
    key = (os.getpid(), variable)
    with _run_log_lock:
        descriptor = _run_log.get(key)
        if descriptor is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
            descriptor = _run_log[key] = os.open(os.environ[variable], flags, 0o644)
    return descriptor


def create_app() -> Flask:
    """The benchmark app, on ``SOLIDQ_BENCH_DATABASE_URL``."""
    url = os.environ.get("SOLIDQ_BENCH_DATABASE_URL")
    if not url:
        raise RuntimeError("Set SOLIDQ_BENCH_DATABASE_URL to the queue's database URL.")
    config = json.loads(os.environ.get("SOLIDQ_BENCH_CONFIG") or "{}")
    if not isinstance(config, dict):
        raise RuntimeError("SOLIDQ_BENCH_CONFIG must be a JSON object.")
    app = common.create_app(url, **config)
    if os.environ.get("SOLIDQ_BENCH_RUN_LOG"):
        signals.perform_start.connect(_log_run)
    if os.environ.get("SOLIDQ_BENCH_START_LOG"):
        signals.perform_start.connect(_log_start)
    if os.environ.get("SOLIDQ_BENCH_PROFILE"):
        from bench import worker_profile

        worker_profile.install(os.environ["SOLIDQ_BENCH_PROFILE"])
    return app
