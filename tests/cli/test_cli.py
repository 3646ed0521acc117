"""``flask solidq status / clear-finished / pause / resume``, and the text status prints."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import sqlalchemy as sa

from flask_solidq import formatting
from flask_solidq import models
from flask_solidq.cli import status
from flask_solidq.operations import queues
from flask_solidq.reads import queue_figures
from flask_solidq.timing import UTC
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import basic as jobs

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
BLOCKED = t.cast(sa.Table, models.BlockedExecution.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)
PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)
SEMAPHORES = t.cast(sa.Table, models.Semaphore.__table__)

NOW = dt.datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def run(app, *args: str):
    return app.test_cli_runner().invoke(args=["solidq", *args])


def take_ready(connection: sa.Connection, job_id: int) -> None:
    connection.execute(READY.delete().where(READY.c.job_id == job_id))


def finish(engine: sa.Engine, job_id: int, age: dt.timedelta) -> None:
    with engine.begin() as connection:
        take_ready(connection, job_id)
        connection.execute(
            JOBS.update().where(JOBS.c.id == job_id).values(finished_at=utcnow() - age)
        )


def enqueue(app, queue: str = "default") -> int:
    with app.app_context():
        return t.cast(int, jobs.store_result.set(queue=queue).perform_later(1).provider_job_id)


def fill_every_section(app, engine: sa.Engine) -> None:
    """A queue with one job in each of ready, failed and blocked; a paused empty queue; a
    process; a semaphore."""
    enqueue(app)
    failed, blocked = enqueue(app), enqueue(app)
    now = utcnow()
    error = {"exception_class": "ValueError", "message": "bad value\nmore", "backtrace": []}
    with engine.begin() as connection:
        take_ready(connection, failed)
        connection.execute(FAILED.insert().values(job_id=failed, error=json.dumps(error)))
        take_ready(connection, blocked)
        connection.execute(
            BLOCKED.insert().values(
                job_id=blocked, queue_name="default", concurrency_key="account/1", expires_at=now
            )
        )
        connection.execute(
            PROCESSES.insert().values(
                kind="Worker", name="worker-ab12", pid=4242, hostname="box", last_heartbeat_at=now
            )
        )
        connection.execute(
            SEMAPHORES.insert().values(key="account/1", value=0, expires_at=now, updated_at=now)
        )
    queues.pause(engine, "mail")


def test_status_of_an_empty_queue_says_so(app, engine):
    result = run(app, "status")

    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "Queues: none yet (no jobs, no pauses).",
        "",
        "Processes: none running.",
        "",
        "Failed jobs: none.",
    ]


def test_status_prints_queues_processes_failed_and_blocked_jobs(app, engine):
    fill_every_section(app, engine)

    result = run(app, "status")

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = lines[lines.index("Queues") + 1].split()
    assert header == [
        "QUEUE",
        "READY",
        "SCHEDULED",
        "DEFERRED",
        "CLAIMED",
        "BLOCKED",
        "FAILED",
        "FINISHED",
        "LATENCY",
        "PAUSED",
    ]
    assert lines[lines.index("Queues") + 2].split()[:8] == [
        "default",
        *("1", "0", "0", "0", "1", "1", "0"),
    ]
    assert lines[lines.index("Queues") + 3].split() == ["mail", *"0000000", "-", "paused"]
    assert lines[lines.index("Processes") + 1].split() == [
        *("ID", "KIND", "NAME", "HOST", "PID", "STATE", "HEARTBEAT")
    ]
    assert lines[lines.index("Processes") + 2].split()[1:6] == [
        "Worker",
        "worker-ab12",
        "box",
        "4242",
        "running",
    ]
    failed_header = lines[lines.index("Failed jobs (latest 1)") + 1]
    assert failed_header.split() == ["ID", "JOB", "QUEUE", "ERROR", "FAILED", "AT"]
    failed = lines[lines.index("Failed jobs (latest 1)") + 2]
    assert "store_result  default  ValueError: bad value  " in failed
    assert "more" not in result.output
    assert lines[lines.index("Blocked jobs") + 2].split() == ["account/1", "1"]
    assert lines[lines.index("Semaphores") + 2].split()[:2] == ["account/1", "0"]


def test_status_limits_the_failed_jobs_it_shows(app, engine):
    ids = [enqueue(app) for _ in range(3)]
    with engine.begin() as connection:
        for job_id in ids:
            take_ready(connection, job_id)
            connection.execute(FAILED.insert().values(job_id=job_id, error="{}"))

    result = run(app, "status", "--failed", "2")

    assert "Failed jobs (latest 2)" in result.output


def test_clear_finished_uses_the_configured_age_by_default(app, engine):
    old, recent = enqueue(app), enqueue(app)
    finish(engine, old, dt.timedelta(days=2))
    finish(engine, recent, dt.timedelta(hours=1))

    result = run(app, "clear-finished")

    assert result.exit_code == 0, result.output
    assert result.output == "Deleted 1 finished job.\n"
    assert [row.id for row in support.rows(engine, JOBS)] == [recent]


def test_clear_finished_takes_an_age_in_seconds(app, engine):
    for job_id in (enqueue(app), enqueue(app)):
        finish(engine, job_id, dt.timedelta(hours=1))

    result = run(app, "clear-finished", "--older-than", "60", "--batch-size", "1")

    assert result.output == "Deleted 2 finished jobs.\n"
    assert support.count(engine, JOBS) == 0


def test_pause_and_resume_say_what_they_did(app, engine):
    assert run(app, "pause", "mail").stdout == "Paused queue 'mail'.\n"  # + a warning: no jobs
    assert run(app, "pause", "mail").output == "Queue 'mail' was already paused.\n"
    assert [row.queue_name for row in support.rows(engine, models.Pause)] == ["mail"]

    assert run(app, "resume", "mail").output == "Resumed queue 'mail'.\n"
    assert run(app, "resume", "mail").output == "Queue 'mail' wasn't paused.\n"
    assert support.count(engine, models.Pause) == 0


def test_pause_rejects_a_blank_queue_name(app, engine):
    result = run(app, "pause", " ")

    assert result.exit_code == 2
    assert "non-empty" in result.output


def test_commands_name_the_fix_when_the_tables_are_missing(tmp_path):
    app = support.create_app(f"sqlite:///{tmp_path}/empty.db")

    result = run(app, "status")

    assert result.exit_code == 1
    assert "flask solidq install" in result.output
    with app.app_context():
        app.extensions["solidq"].engine.dispose()
        support.db.engines[None].dispose()


def test_format_table_aligns_columns_and_numbers_right():
    table = formatting.format_table(["NAME", "SIZE"], [["a", "1"], ["longer", "100"]], right={1})

    assert table.splitlines() == [
        "  NAME    SIZE",
        "  a          1",
        "  longer   100",
    ]


def test_format_duration_picks_the_two_largest_units():
    assert [formatting.format_duration(s) for s in (0.4, 45, 185, 7800, 4 * 86400 + 3 * 3600)] == [
        "0s",
        "45s",
        "3m05s",
        "2h10m",
        "4d03h",
    ]


def test_render_queues_shows_latency_only_for_queues_with_ready_jobs():
    counts = [
        queue_figures.QueueCounts("default", ready=2, failed=1, latency=75.0),
        queue_figures.QueueCounts("mail", scheduled=3, deferred=2, paused=True),
    ]

    assert status.render_queues(counts).splitlines() == [
        "Queues",
        "  QUEUE    READY  SCHEDULED  DEFERRED  CLAIMED  BLOCKED  FAILED  FINISHED  LATENCY"
        "  PAUSED",
        "  default      2          0         0        0        0       1         0    1m15s",
        "  mail         0          1         2        0        0       0         0        -"
        "  paused",
    ]


def test_render_failed_jobs_cuts_long_messages_to_one_short_line():
    failed = queue_figures.FailedJob(
        job_id=7,
        active_job_id="abc",
        class_name="store_result",
        queue_name="default",
        error_class="RuntimeError",
        message="x" * 100 + "\nsecond line",
        failed_at=NOW - dt.timedelta(seconds=30),
    )

    (line,) = status.render_failed_jobs([failed], NOW).splitlines()[2:]

    assert f"RuntimeError: {'x' * 57}..." in line
    assert line.endswith("30s ago")


def test_render_semaphores_says_when_a_lease_ran_out():
    rendered = status.render_semaphores(
        [
            queue_figures.SemaphoreState("a", 1, NOW + dt.timedelta(minutes=5)),
            queue_figures.SemaphoreState("b", 0, NOW - dt.timedelta(seconds=12)),
        ],
        NOW,
    )

    assert rendered.splitlines()[2:] == [
        "  a             1  in 5m00s",
        "  b             0  expired 12s ago",
    ]
