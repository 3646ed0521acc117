"""Jobs and child processes of the coalescing process tests
(tests/controls/coalesce/test_coalesce_processes.py).

The jobs record every run in ``solidq_test_coalesce_runs``, a table of the tests' own in the
queue's database: one row per run of :func:`dedupe`, one row per call of a run of
:func:`collect`, each with the job row it ran as and a token of that run, so the tests can
tell a job that ran twice from one that ran once with several calls.

:func:`race` and :func:`serve` are the bodies of the enqueuing processes (started with the
``spawn`` method: each imports this module and builds its own app).

Every job name starts with ``coalesce_process_test.`` (job names are process-wide).
"""

from __future__ import annotations

import os
import random
import time
import traceback
import typing as t
import uuid

import sqlalchemy as sa
from flask import current_app
from sqlalchemy import orm

from flask_solidq import coalesce
from flask_solidq import current_job
from flask_solidq.storage import db as solidq_db
from tests import support
from tests.support import solidq

if t.TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.synchronize import Event

MAX_CALLS = 10

RUNS = sa.Table(
    "solidq_test_coalesce_runs",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_name", sa.String(100), nullable=False),
    sa.Column("job_id", sa.BigInteger, nullable=False),
    sa.Column("run", sa.String(32), nullable=False),
    sa.Column("key", sa.String(100), nullable=False),
    sa.Column("value", sa.String(100), nullable=False),
    sa.Column("call_id", sa.BigInteger),
    sa.Column("pid", sa.Integer, nullable=False),
)


class Base(orm.DeclarativeBase):
    pass


class Note(Base):
    """A row of the app's own, written in the app's session to make an enqueue join it."""

    __tablename__ = "solidq_test_coalesce_notes"

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    text: orm.Mapped[str] = orm.mapped_column(sa.String(50))


def _record(job_name: str, rows: list[dict[str, t.Any]]) -> None:
    run = uuid.uuid4().hex
    common = {"job_name": job_name, "job_id": current_job.provider_job_id, "run": run}
    engine = t.cast(sa.Engine, current_app.extensions["solidq"].engine)
    with solidq_db.write(engine) as connection:
        connection.execute(RUNS.insert(), [{**common, "pid": os.getpid(), **row} for row in rows])


@solidq.job(name="coalesce_process_test.dedupe")
@coalesce(key=lambda key, _value: key)
def dedupe(key: str, value: str) -> None:
    _record("coalesce_process_test.dedupe", [{"key": key, "value": value, "call_id": None}])


@solidq.job(name="coalesce_process_test.collect")
@coalesce(key=lambda key, _value: key, on_conflict="collect", max_calls=MAX_CALLS)
def collect(calls: list[t.Any]) -> None:
    _record(
        "coalesce_process_test.collect",
        [{"key": call.args[0], "value": call.args[1], "call_id": call.id} for call in calls],
    )


DEFINITIONS: dict[str, t.Any] = {
    "coalesce_process_test.dedupe": dedupe,
    "coalesce_process_test.collect": collect,
}


class Outcome(t.NamedTuple):
    """What one call reported: its status (``"created"``...; None if it had none), the job
    row that holds it, and the error it raised, if any."""

    key: str
    value: str
    status: str | None
    job_id: int | None
    error: str | None


def _enqueue(job_name: str, key: str, value: str) -> Outcome:
    try:
        job = DEFINITIONS[job_name].perform_later(key, value)
    except Exception as error:  # noqa: BLE001 - reported to the test
        cause = f" (cause: {error.__cause__})" if error.__cause__ else ""
        return Outcome(key, value, None, None, f"{type(error).__name__}: {error}{cause}")
    status = job.coalesce_status.value if job.coalesce_status is not None else None
    return Outcome(key, value, status, job.provider_job_id, None)


def _dispose(app: t.Any) -> None:
    with app.app_context():
        app.extensions["solidq"].dispose()
        support.db.engines[None].dispose()


def race(
    database_url: str,
    job_name: str,
    keys: list[str],
    calls: int,
    name: str,
    go: Event,
    connection: Connection,
) -> None:
    """Build an app, send "ready", wait for ``go``, then enqueue ``calls`` calls of
    ``job_name`` one by one, as fast as possible, each on a key drawn from ``keys`` with the
    value ``"<name>-<index>"``. Sends back (started, finished, outcomes) (monotonic clock),
    or ("failed", traceback)."""
    try:
        app = support.create_app(database_url)
        rng = random.Random(name)
        with app.app_context():
            app.extensions["solidq"].check_tables()
            connection.send("ready")
            if not go.wait(60):
                raise RuntimeError("the go event never came")
            started = time.monotonic()
            outcomes = [
                _enqueue(job_name, rng.choice(keys), f"{name}-{index}") for index in range(calls)
            ]
            finished = time.monotonic()
        _dispose(app)
        connection.send((started, finished, outcomes))
    except BaseException:  # noqa: BLE001 - reported to the test
        connection.send(("failed", traceback.format_exc()))
    finally:
        connection.close()


def serve(database_url: str, connection: Connection) -> None:
    """Build an app, send "ready", then for each (job_name, key, value) received, send
    "entering", enqueue it, and send its :class:`Outcome`; stop at None."""
    try:
        app = support.create_app(database_url)
        with app.app_context():
            app.extensions["solidq"].check_tables()
            connection.send("ready")
            while (request := connection.recv()) is not None:
                job_name, key, value = request
                connection.send("entering")
                connection.send(_enqueue(job_name, key, value))
        _dispose(app)
    except BaseException:  # noqa: BLE001 - reported to the test
        connection.send(("failed", traceback.format_exc()))
    finally:
        connection.close()
