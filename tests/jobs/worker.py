"""Jobs for the runtime tests: each leaves evidence of its runs in ``solidq_test_runs``, a table
of the tests' own, so a test can read across processes what a worker did (which job, which
value, in which process and thread, when).

The table lives in the queue's database; :func:`tests.support.runtime.runs_table` creates it.
Every name starts with ``worker_test.`` (job names are process-wide).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import typing as t

import sqlalchemy as sa
from flask import current_app

from flask_solidq import current_job
from flask_solidq import discard_on
from flask_solidq import retry_on
from flask_solidq.models.base import UTCDateTime
from flask_solidq.storage import db as solidq_db
from flask_solidq.timing import utcnow
from tests.support import solidq

RUNS = sa.Table(
    "solidq_test_runs",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_name", sa.String(100), nullable=False),
    sa.Column("value", sa.String(255)),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("thread", sa.String(255), nullable=False),
    sa.Column("data", sa.Text),
    sa.Column("started_at", UTCDateTime(), nullable=False),
    sa.Column("finished_at", UTCDateTime()),
)


class Flaky(Exception):
    """Raised by :func:`flaky`, which retries on it."""


class NotWanted(Exception):
    """Raised by :func:`unwanted`, which discards on it."""


def _engine() -> sa.Engine:
    return t.cast(sa.Engine, current_app.extensions["solidq"].engine)


def record_run(job_name: str, value: object, *, data: object = None, finished: bool = True) -> int:
    """Insert a run row for this process and thread; return its id."""
    now = utcnow()
    row = {
        "job_name": job_name,
        "value": None if value is None else str(value),
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
        "data": None if data is None else json.dumps(data),
        "started_at": now,
        "finished_at": now if finished else None,
    }
    with solidq_db.write(_engine()) as connection:
        return int(connection.execute(RUNS.insert(), row).inserted_primary_key[0])


def finish_run(run_id: int) -> None:
    """Set a run's ``finished_at``."""
    with solidq_db.write(_engine()) as connection:
        connection.execute(RUNS.update().where(RUNS.c.id == run_id).values(finished_at=utcnow()))


def runs_of(job_name: str, value: object) -> list[int]:
    """The ids of the runs of ``job_name`` with ``value`` so far."""
    query = sa.select(RUNS.c.id).where(RUNS.c.job_name == job_name, RUNS.c.value == str(value))
    with _engine().connect() as connection:
        return list(connection.scalars(query))


@solidq.job(name="worker_test.noop")
def noop(value: object) -> None:
    """Nothing: a run that takes microseconds, whatever the machine's load, so a worker
    timing its runs sees quick ones (a ``record`` job's commit can take milliseconds)."""


@solidq.job(name="worker_test.record")
def record(value: object) -> None:
    """One finished run row."""
    record_run("worker_test.record", value)


@solidq.job(name="worker_test.sleep")
def sleep(value: object, seconds: float, rerun_seconds: float | None = None) -> None:
    """A run row without ``finished_at`` first (the test knows the job is running), then
    ``seconds`` of sleep (``rerun_seconds`` if the job ran before), then ``finished_at``."""
    ran_before = bool(runs_of("worker_test.sleep", value))
    run_id = record_run("worker_test.sleep", value, finished=False)
    time.sleep(rerun_seconds if ran_before and rerun_seconds is not None else seconds)
    finish_run(run_id)


@solidq.job(name="worker_test.fail")
def fail(value: object) -> None:
    """A run row, then a ValueError."""
    record_run("worker_test.fail", value)
    raise ValueError(f"failing on purpose with {value}")


@solidq.job(name="worker_test.exit")
def exit_process(value: object) -> None:
    """A run row, then ``sys.exit(3)``: what a job must not do to its worker."""
    record_run("worker_test.exit", value)
    sys.exit(3)


@solidq.job(name="worker_test.flaky")
@retry_on(Flaky, attempts=3, wait=0)
def flaky(value: object) -> None:
    """A run row, then :class:`Flaky`, which is retried: three runs in all, then it fails."""
    record_run("worker_test.flaky", value, data={"executions": current_job.executions})
    raise Flaky(f"flaky run {current_job.executions}")


def _fallback(job: t.Any, error: BaseException) -> None:
    record_run("worker_test.flaky_with_fallback.fallback", job.arguments[0], data=str(error))


@solidq.job(name="worker_test.flaky_with_fallback")
@retry_on(Flaky, attempts=3, wait=0, fallback=_fallback)
def flaky_with_fallback(value: object) -> None:
    """Like :func:`flaky`, but the fallback records a run when the attempts run out."""
    record_run("worker_test.flaky_with_fallback", value)
    raise Flaky(f"flaky run {current_job.executions}")


@solidq.job(name="worker_test.unwanted")
@discard_on(NotWanted)
def unwanted(value: object) -> None:
    """A run row, then :class:`NotWanted`, which is discarded."""
    record_run("worker_test.unwanted", value)
    raise NotWanted(str(value))


@solidq.job(name="worker_test.introspect")
def introspect(value: object) -> None:
    """A run row whose data is what ``current_job`` says."""
    record_run(
        "worker_test.introspect",
        value,
        data={
            "job_id": current_job.job_id,
            "provider_job_id": current_job.provider_job_id,
            "executions": current_job.executions,
            "arguments": list(current_job.arguments),
        },
    )
