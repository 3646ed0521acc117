"""Queues: pause and resume, and the figures status reads, on every backend."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import PendingMigrations
from flask_solidq import models
from flask_solidq.operations import queues
from flask_solidq.operations.processes import process_rows
from flask_solidq.reads import queue_figures
from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import basic as jobs
from tests.support import solidq

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
BLOCKED = t.cast(sa.Table, models.BlockedExecution.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)
PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)
SEMAPHORES = t.cast(sa.Table, models.Semaphore.__table__)


def enqueue(queue: str, **options: t.Any) -> int:
    """Enqueue a job on ``queue``; return its row id."""
    job = jobs.store_result.set(queue=queue, **options).perform_later(queue)
    return t.cast(int, job.provider_job_id)


def move(engine: sa.Engine, job_id: int, table: sa.Table, **values: t.Any) -> None:
    """Turn a ready job's execution into a row of ``table``."""
    with engine.begin() as connection:
        connection.execute(READY.delete().where(READY.c.job_id == job_id))
        connection.execute(table.insert().values(job_id=job_id, created_at=utcnow(), **values))


def finish(engine: sa.Engine, job_id: int) -> None:
    with engine.begin() as connection:
        connection.execute(READY.delete().where(READY.c.job_id == job_id))
        connection.execute(JOBS.update().where(JOBS.c.id == job_id).values(finished_at=utcnow()))


def block(engine: sa.Engine, job_id: int, queue: str, key: str) -> None:
    expires_at = utcnow() + dt.timedelta(minutes=5)
    move(engine, job_id, BLOCKED, queue_name=queue, concurrency_key=key, expires_at=expires_at)


def fail(engine: sa.Engine, job_id: int, exception_class: str, message: str) -> None:
    error = {"exception_class": exception_class, "message": message, "backtrace": ["a.py:1"]}
    move(engine, job_id, FAILED, error=json.dumps(error))


def read(engine: sa.Engine, function: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
    with db.read(engine) as connection:
        return function(connection, *args)


def test_pausing_adds_one_row_however_often_it_is_done(app, engine):
    assert queues.pause(engine, "mail") is True
    assert queues.pause(engine, "mail") is False

    assert [row.queue_name for row in support.rows(engine, models.Pause)] == ["mail"]


def test_resuming_deletes_the_pause_and_resuming_again_does_nothing(app, engine):
    queues.pause(engine, "mail")

    assert queues.resume(engine, "mail") is True
    assert queues.resume(engine, "mail") is False
    assert support.count(engine, models.Pause) == 0


def test_paused_queues_names_every_paused_queue(app, engine):
    for name in ("mail", "reports", "low"):
        queues.pause(engine, name)
    queues.resume(engine, "reports")

    assert read(engine, queue_figures.paused_queues) == {"mail", "low"}


@pytest.mark.parametrize("name", ["", "  ", None])
def test_pausing_refuses_a_blank_queue_name(app, engine, name):
    with pytest.raises(TypeError, match="non-empty"):
        queues.pause(engine, name)


def test_the_extension_pauses_and_resumes_in_the_app_context(app, engine):
    with app.app_context():
        solidq.pause("mail")
        solidq.pause("mail")
        assert read(engine, queue_figures.paused_queues) == {"mail"}
        solidq.resume("mail")
        solidq.resume("mail")
    assert read(engine, queue_figures.paused_queues) == set()


def test_the_extension_pause_names_the_fix_when_the_tables_are_missing(tmp_path):
    app = support.create_app(f"sqlite:///{tmp_path}/empty.db")
    with app.app_context(), pytest.raises(PendingMigrations):
        solidq.pause("mail")
    with app.app_context():
        app.extensions["solidq"].engine.dispose()
        support.db.engines[None].dispose()


def test_queue_counts_counts_each_state_per_queue(app, engine):
    with app.app_context():
        _ready, claimed, failed, finished, blocked = [enqueue("default") for _ in range(5)]
        enqueue("default", wait=3600)
        move(engine, claimed, CLAIMED, process_id=None)
        fail(engine, failed, "ValueError", "bad")
        finish(engine, finished)
        block(engine, blocked, "default", "account/1")
        other = [enqueue("mail") for _ in range(2)]
        finish(engine, other[0])

    counts = {queue.queue_name: queue for queue in read(engine, queue_figures.queue_counts)}

    assert sorted(counts) == ["default", "mail"]
    default = counts["default"]
    assert (
        default.ready,
        default.scheduled,
        default.claimed,
        default.blocked,
        default.failed,
        default.finished,
    ) == (1, 1, 1, 1, 1, 1)
    mail = counts["mail"]
    assert (mail.ready, mail.finished, mail.scheduled, mail.failed) == (1, 1, 0, 0)
    assert not default.paused and not mail.paused


def test_queue_counts_lists_a_paused_queue_without_jobs(app, engine):
    queues.pause(engine, "idle")
    (idle,) = read(engine, queue_figures.queue_counts)

    assert idle == queue_figures.QueueCounts(queue_name="idle", paused=True)


def test_latency_is_the_age_of_the_oldest_ready_job(app, engine):
    with app.app_context():
        oldest, newer = enqueue("default"), enqueue("default")
    now = utcnow()
    with engine.begin() as connection:
        for job_id, age in ((oldest, 120), (newer, 30)):
            connection.execute(
                READY.update()
                .where(READY.c.job_id == job_id)
                .values(created_at=now - dt.timedelta(seconds=age))
            )

    with db.read(engine) as connection:
        (default,) = queue_figures.queue_counts(connection, now)

    assert default.latency == pytest.approx(120, abs=0.01)


def test_latency_is_zero_without_ready_jobs(app, engine):
    with app.app_context():
        enqueue("later", wait=60)

    (later,) = read(engine, queue_figures.queue_counts)

    assert (later.scheduled, later.latency) == (1, 0.0)


def test_failed_jobs_parses_the_error_json_newest_first(app, engine):
    with app.app_context():
        first, second = enqueue("default"), enqueue("mail")
    fail(engine, first, "ValueError", "bad value")
    fail(engine, second, "tests.jobs.basic.Boom", "went off")

    failed = read(engine, queue_figures.failed_jobs)

    assert [(job.job_id, job.queue_name) for job in failed] == [
        (second, "mail"),
        (first, "default"),
    ]
    assert (failed[0].error_class, failed[0].message) == ("tests.jobs.basic.Boom", "went off")
    assert (failed[1].class_name, failed[1].error_class, failed[1].message) == (
        "store_result",
        "ValueError",
        "bad value",
    )
    assert failed[1].failed_at.tzinfo is not None
    assert read(engine, queue_figures.failed_jobs, 1) == failed[:1]


def test_failed_jobs_keeps_an_error_that_is_not_json_as_the_message(app, engine):
    with app.app_context():
        job_id = enqueue("default")
    move(engine, job_id, FAILED, error="Traceback (most recent call last)")

    (failed,) = read(engine, queue_figures.failed_jobs)

    assert (failed.error_class, failed.message) == ("", "Traceback (most recent call last)")


def test_blocked_summary_counts_jobs_per_concurrency_key(app, engine):
    with app.app_context():
        ids = [enqueue("default") for _ in range(3)]
    block(engine, ids[0], "default", "account/2")
    block(engine, ids[1], "default", "account/1")
    block(engine, ids[2], "default", "account/1")

    assert read(engine, queue_figures.blocked_summary) == [("account/1", 2), ("account/2", 1)]


def test_semaphores_lists_key_value_and_expiry(app, engine):
    expires_at = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.timezone.utc)
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(
            SEMAPHORES.insert(),
            [
                {
                    "key": k,
                    "value": v,
                    "expires_at": expires_at,
                    "created_at": now,
                    "updated_at": now,
                }
                for k, v in (("b", 0), ("a", 2))
            ],
        )

    assert read(engine, queue_figures.semaphores) == [("a", 2, expires_at), ("b", 0, expires_at)]


def test_process_rows_lists_the_registered_processes(app, engine):
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(
            PROCESSES.insert(),
            [
                {"kind": "Worker", "name": "worker-1", "pid": 11, "last_heartbeat_at": now},
                {"kind": "Dispatcher", "name": "dispatcher-1", "pid": 12, "last_heartbeat_at": now},
            ],
        )

    rows = read(engine, process_rows)

    assert [(row.kind, row.name, row.pid) for row in rows] == [
        ("Dispatcher", "dispatcher-1", 12),
        ("Worker", "worker-1", 11),
    ]
