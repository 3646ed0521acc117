"""Recurring tasks on every backend: loading the configuration, persisting the tasks, and each
tick enqueued exactly once however many threads and processes race for it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import subprocess
import sys
import threading

import pytest

from flask_solidq import coalesce
from flask_solidq import models
from flask_solidq.config import RecurringSettings
from flask_solidq.definitions.job import Job
from flask_solidq.recurring import tasks
from flask_solidq.storage import db
from flask_solidq.timing import UTC
from tests import support
from tests.scripts import recurring_ticks
from tests.support import processes
from tests.support import solidq

JOBS = models.JobRecord
READY = models.ReadyExecution
TASKS = models.RecurringTask
EXECUTIONS = models.RecurringExecution

TICK = dt.datetime(2026, 3, 1, 12, 5, tzinfo=UTC)


@solidq.job(name="recurring_test.report", queue="reports", priority=3)
def report(kind: str, *, days: int = 1) -> None:
    """Does nothing: these tests only enqueue."""


class CleanupJob(Job, name="recurring_test.cleanup"):
    def perform(self) -> None:
        pass


@solidq.job(name="recurring_test.replacing")
@coalesce(key="all", on_conflict="replace")
def replacing() -> None:
    pass


@solidq.job(name="recurring_test.debouncing")
@coalesce(key="all", debounce=5)
def debouncing() -> None:
    pass


def not_a_job() -> None:
    pass


def settings(key: str = "report", **options: object) -> RecurringSettings:
    values: dict[str, object] = {"job": f"{__name__}:report", "schedule": "every minute"}
    values.update(options)
    return RecurringSettings(key=key, **values)  # type: ignore[arg-type]


def task(key: str = "report", **options: object) -> tasks.RecurringTask:
    return tasks.RecurringTask.from_settings(settings(key, **options))


# -- loading -------------------------------------------------------------------------------------


def test_load_all_parses_each_schedule_and_loads_each_job_definition():
    loaded = tasks.load_all(
        [
            settings(
                "daily_report",
                schedule="every day at 9am Europe/Paris",
                args=("sales",),
                kwargs={"days": 7},
                queue="urgent",
                priority=1,
                description="Sales of the week",
            ),
            settings("cleanup", job=f"{__name__}:CleanupJob", schedule="*/5 * * * *"),
        ]
    )

    daily, cleanup = loaded
    assert daily.key == "daily_report"
    assert daily.definition is report
    assert (daily.schedule.cron, daily.schedule.zone) == ("0 9 * * *", "Europe/Paris")
    assert (daily.args, daily.kwargs) == (("sales",), {"days": 7})
    assert (daily.queue, daily.priority, daily.description) == ("urgent", 1, "Sales of the week")
    assert cleanup.definition is CleanupJob
    assert cleanup.next_time_after(TICK) == dt.datetime(2026, 3, 1, 12, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"schedule": "every fortnight"}, "'every fortnight'"),
        ({"job": "tests.no_such_module:report"}, "no module 'tests.no_such_module'"),
        ({"job": f"{__name__}:no_such_job"}, "has no attribute 'no_such_job'"),
        ({"job": "no colon"}, "not an import path"),
        ({"job": f"{__name__}:not_a_job"}, "not a job definition"),
        ({"job": "flask_solidq:Job"}, "not a job definition"),
        ({"job": f"{__name__}:replacing"}, "on_conflict='replace'"),
        ({"job": f"{__name__}:debouncing"}, "debounce="),
        ({"args": (object(),)}, "argument 0"),
        ({"queue": ""}, "queue"),
    ],
)
def test_load_all_refuses_an_invalid_task_naming_its_key(options, message):
    entries = [settings("fine"), settings("cleanup", **options)]

    with pytest.raises(ValueError, match=r"^SOLIDQ_RECURRING\['cleanup'\]: ") as raised:
        tasks.load_all(entries)

    assert message in str(raised.value)


# -- persisting ----------------------------------------------------------------------------------


def test_persist_all_stores_each_configured_task_by_key(app, engine):
    tasks.persist_all(
        engine,
        [
            task("daily", args=("sales",), kwargs={"days": 7}, description="Daily sales"),
            task("cleanup", job=f"{__name__}:CleanupJob", schedule="*/5 * * * *"),
        ],
    )

    cleanup, daily = sorted(support.rows(engine, TASKS), key=lambda row: row.key)
    assert (daily.key, daily.schedule, daily.class_name) == (
        "daily",
        "every minute",
        "recurring_test.report",
    )
    assert (daily.queue_name, daily.priority, daily.static) == ("reports", 3, True)
    assert daily.description == "Daily sales"
    assert daily.command is None
    assert json.loads(daily.arguments) == {
        "job": f"{__name__}:report",
        "args": ["sales"],
        "kwargs": {"days": 7},
    }
    assert (cleanup.class_name, cleanup.queue_name, cleanup.priority) == (
        "recurring_test.cleanup",
        "default",
        0,
    )
    assert daily.created_at.tzinfo is UTC


def test_persist_all_updates_changed_tasks_and_deletes_static_tasks_no_longer_configured(
    app, engine
):
    tasks.persist_all(engine, [task("daily"), task("gone"), task("kept")])
    with engine.begin() as connection:
        connection.execute(
            models.RecurringTask.__table__.insert(),
            {"key": "added_at_runtime", "schedule": "every hour", "static": False},
        )
    (first_daily,) = support.rows(engine, TASKS, TASKS.key == "daily")

    tasks.persist_all(
        engine, [task("daily", schedule="every hour", queue="urgent", priority=9), task("kept")]
    )

    rows = {row.key: row for row in support.rows(engine, TASKS)}
    assert sorted(rows) == ["added_at_runtime", "daily", "kept"]
    daily = rows["daily"]
    assert (daily.id, daily.schedule, daily.queue_name, daily.priority) == (
        first_daily.id,
        "every hour",
        "urgent",
        9,
    )
    assert daily.created_at == first_daily.created_at
    assert daily.updated_at >= first_daily.updated_at


def test_persist_all_leaves_unchanged_tasks_as_they_were(app, engine):
    tasks.persist_all(engine, [task("daily", args=("sales",))])
    (before,) = support.rows(engine, TASKS)

    tasks.persist_all(engine, [task("daily", args=("sales",))])

    (after,) = support.rows(engine, TASKS)
    assert after._asdict() == before._asdict()


def test_a_configured_task_takes_over_a_runtime_task_with_its_key(app, engine):
    with engine.begin() as connection:
        connection.execute(
            models.RecurringTask.__table__.insert(),
            {"key": "daily", "schedule": "every hour", "static": False},
        )

    tasks.persist_all(engine, [task("daily")])

    (row,) = support.rows(engine, TASKS)
    assert (row.schedule, row.static, row.class_name) == (
        "every minute",
        True,
        "recurring_test.report",
    )


def test_persist_all_with_no_tasks_deletes_every_static_task(app, engine):
    tasks.persist_all(engine, [task("daily")])

    tasks.persist_all(engine, [])

    assert support.count(engine, TASKS) == 0


def test_schedulers_persisting_the_same_tasks_at_once_neither_fail_nor_duplicate(app, engine):
    configured = [task(f"task_{index}") for index in range(10)]
    failures: list[BaseException] = []
    start = threading.Barrier(6)

    def persist() -> None:
        try:
            with app.app_context():
                start.wait()
                tasks.persist_all(engine, configured)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=persist) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    assert sorted(row.key for row in support.rows(engine, TASKS)) == sorted(
        item.key for item in configured
    )


# -- enqueuing ticks -----------------------------------------------------------------------------


def test_enqueue_tick_enqueues_the_tasks_job_and_records_the_tick(app, engine):
    job = tasks.enqueue_tick(engine, task(), TICK)

    assert job is not None and job.successfully_enqueued
    (record,) = support.rows(engine, JOBS)
    assert (record.id, record.class_name) == (job.provider_job_id, "recurring_test.report")
    (execution,) = support.rows(engine, EXECUTIONS)
    assert (execution.job_id, execution.task_key, execution.run_at) == (record.id, "report", TICK)
    assert support.count(engine, READY) == 1


def test_a_second_enqueue_of_the_same_tick_adds_nothing_and_returns_none(app, engine, caplog):
    first = tasks.enqueue_tick(engine, task(), TICK)

    with caplog.at_level(logging.INFO, logger="flask_solidq.scheduler"):
        second = tasks.enqueue_tick(engine, task(), TICK)

    assert second is None
    (record,) = support.rows(engine, JOBS)
    assert record.id == first.provider_job_id
    assert support.count(engine, EXECUTIONS) == 1
    assert support.count(engine, READY) == 1
    assert "already enqueued" in caplog.text


def test_the_same_tick_in_another_zone_or_naive_is_the_same_tick(app, engine):
    tasks.enqueue_tick(engine, task(), TICK)

    paris = TICK.astimezone(dt.timezone(dt.timedelta(hours=1)))
    assert tasks.enqueue_tick(engine, task(), paris) is None
    assert tasks.enqueue_tick(engine, task(), TICK.replace(tzinfo=None)) is None
    assert support.count(engine, JOBS) == 1


def test_each_tick_and_each_task_enqueues_its_own_job(app, engine):
    next_tick = TICK + dt.timedelta(minutes=1)

    jobs = [
        tasks.enqueue_tick(engine, task("one"), TICK),
        tasks.enqueue_tick(engine, task("one"), next_tick),
        tasks.enqueue_tick(engine, task("two"), TICK),
    ]

    assert all(job is not None for job in jobs)
    ledger = {(row.task_key, row.run_at) for row in support.rows(engine, EXECUTIONS)}
    assert ledger == {("one", TICK), ("one", next_tick), ("two", TICK)}
    assert support.count(engine, JOBS) == 3


def test_the_job_gets_the_tasks_arguments_queue_and_priority(app, engine):
    configured = task(args=("sales",), kwargs={"days": 7}, queue="urgent", priority=1)

    job = tasks.enqueue_tick(engine, configured, TICK)

    assert (job.arguments, job.kwargs) == (("sales",), {"days": 7})
    (record,) = support.rows(engine, JOBS)
    assert (record.queue_name, record.priority) == ("urgent", 1)
    payload = json.loads(record.arguments)
    assert (payload["args"], payload["kwargs"]) == (["sales"], {"days": 7})
    (ready,) = support.rows(engine, READY)
    assert (ready.queue_name, ready.priority) == ("urgent", 1)


def test_without_a_queue_or_priority_the_job_keeps_its_definitions(app, engine):
    tasks.enqueue_tick(engine, task(args=("sales",)), TICK)

    (record,) = support.rows(engine, JOBS)
    assert (record.queue_name, record.priority) == ("reports", 3)


def test_an_enqueue_that_fails_is_logged_not_raised_and_leaves_nothing(app, engine, caplog):
    broken = dataclasses.replace(task(), args=(object(),))

    with caplog.at_level(logging.ERROR, logger="flask_solidq.scheduler"):
        assert tasks.enqueue_tick(engine, broken, TICK) is None

    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert "'report'" in record.getMessage()
    assert record.exc_info is not None
    assert support.count(engine, JOBS) == 0
    assert support.count(engine, EXECUTIONS) == 0


# -- racing schedulers ---------------------------------------------------------------------------


def test_a_tick_racing_an_uncommitted_enqueue_of_it_waits_then_adds_nothing(app, engine, caplog):
    holding = threading.Event()
    release = threading.Event()
    outcomes: dict[str, object] = {}

    def enqueue_and_hold() -> None:
        # An enclosing transaction keeps the first enqueue uncommitted until the test says so.
        with app.app_context(), db.transaction(engine):
            outcomes["first"] = tasks.enqueue_tick(engine, task(), TICK)
            holding.set()
            release.wait(10)

    def enqueue_meanwhile() -> None:
        with app.app_context():
            outcomes["second"] = tasks.enqueue_tick(engine, task(), TICK)

    first = threading.Thread(target=enqueue_and_hold)
    second = threading.Thread(target=enqueue_meanwhile)
    with caplog.at_level(logging.INFO, logger="flask_solidq.scheduler"):
        first.start()
        assert holding.wait(10)
        second.start()
        second.join(0.5)
        waited = second.is_alive()
        release.set()
        first.join()
        second.join()

    assert waited, "the second enqueue should wait for the first's transaction"
    assert outcomes["first"] is not None
    assert outcomes["second"] is None
    (record,) = support.rows(engine, JOBS)
    assert record.id == outcomes["first"].provider_job_id
    assert support.count(engine, EXECUTIONS) == 1
    assert "already enqueued" in caplog.text
    assert not [entry for entry in caplog.records if entry.levelno >= logging.WARNING]


THREADS = 4
PROCESSES = 3
RACE_TICKS = 20


@pytest.mark.processes
def test_threads_and_processes_racing_for_the_same_ticks_enqueue_each_exactly_once(
    app, engine, database_url, tmp_path
):
    first_run_at = dt.datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    go_file = tmp_path / "go"
    racers = [start_racing_process(database_url, go_file, first_run_at) for _ in range(PROCESSES)]
    try:
        for racer in racers:
            assert racer.stdout.readline().strip() == "ready", racer.stderr.read()
        thread_wins, thread_errors = race_in_threads(app, engine, first_run_at, go_file)
        outcomes = [racer.communicate(timeout=120) for racer in racers]
    finally:
        for racer in racers:
            processes.end(racer)

    process_wins = 0
    for racer, (out, err) in zip(racers, outcomes, strict=True):
        assert racer.returncode == 0, err
        assert out.strip().endswith(" errors 0"), out + err
        process_wins += int(out.split()[1])
    assert thread_errors == []
    assert thread_wins + process_wins == RACE_TICKS
    assert support.count(engine, JOBS) == RACE_TICKS
    assert support.count(engine, READY) == RACE_TICKS
    executions = support.rows(engine, EXECUTIONS)
    assert sorted(row.run_at for row in executions) == recurring_ticks.race_ticks(
        first_run_at, RACE_TICKS
    )
    assert {row.job_id for row in executions} == {row.id for row in support.rows(engine, JOBS)}


def start_racing_process(database_url, go_file, first_run_at) -> subprocess.Popen:
    return processes.start(
        [
            sys.executable,
            "-m",
            "tests.scripts.recurring_ticks",
            database_url,
            str(go_file),
            first_run_at.isoformat(),
            str(RACE_TICKS),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def race_in_threads(app, engine, first_run_at, go_file) -> tuple[int, list[str]]:
    """Touch the go file and race the processes from ``THREADS`` threads; return how many
    ticks the threads won and the errors logged or raised."""
    race = tasks.RecurringTask.from_settings(recurring_ticks.RACE)
    ticks = recurring_ticks.race_ticks(first_run_at, RACE_TICKS)
    wins: list[object] = []
    errors: list[str] = []
    handler = recurring_ticks.ErrorCount()
    handler.emit = lambda record: errors.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("flask_solidq.scheduler")
    go = threading.Event()

    def enqueue_all_ticks() -> None:
        try:
            with app.app_context():
                go.wait()
                wins.extend(
                    job for run_at in ticks if (job := tasks.enqueue_tick(engine, race, run_at))
                )
        except BaseException as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=enqueue_all_ticks) for _ in range(THREADS)]
    logger.addHandler(handler)
    try:
        for thread in threads:
            thread.start()
        go_file.touch()
        go.set()
        for thread in threads:
            thread.join()
    finally:
        logger.removeHandler(handler)
    return len(wins), errors
