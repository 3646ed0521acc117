"""Thread mode: the supervisor runs its worker and dispatcher as threads of this process
(``launcher.supervisor(app, mode="thread")``, run in the test's main thread). Jobs run here, so
signals can be watched; a job enqueued or scheduled here wakes the idle worker or dispatcher at
once; ``stop()`` is graceful; without ``SOLIDQ_PRESERVE_FINISHED_JOBS`` finished jobs go."""

from __future__ import annotations

import collections
import datetime as dt
import os
import threading
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import signals
from flask_solidq.processes import launcher as process_launcher
from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import FAILED
from tests.support.runtime import JOBS
from tests.support.runtime import READY

runs_table = runtime_support.runs_table


@pytest.fixture
def make_app(database_url, runs_table):
    """Build apps on ``database_url`` with the fast settings and ``config``; their rows are
    deleted afterwards."""
    apps = []

    def make(**config: t.Any):
        app = support.create_app(database_url, **{**runtime_support.FAST_CONFIG, **config})
        apps.append(app)
        return app

    yield make
    for app in apps:
        support.delete_all_rows(engine_of(app))
        runtime_support.dispose_engines(app)


def engine_of(app) -> sa.Engine:
    with app.app_context():
        return app.extensions["solidq"].engine


def supervise(supervisor, scenario: t.Callable[[], t.Any]) -> t.Any:
    """Run ``supervisor`` in this thread (the main one: it installs signal handlers) while
    ``scenario`` runs in another; stop the supervisor when the scenario ends, and return what
    it returned (or raise what it raised)."""
    outcome: dict[str, t.Any] = {}

    def drive() -> None:
        try:
            outcome["result"] = scenario()
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            outcome["error"] = error
        finally:
            supervisor.stop()

    driver = threading.Thread(target=drive, name="test-scenario")
    driver.start()
    try:
        supervisor.run()
    finally:
        supervisor.stop()
        driver.join(30)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


def enqueue(app, job, *args, **options) -> int:
    with app.app_context():
        target = job.set(**options) if options else job
        return target.perform_later(*args).provider_job_id


def test_thread_mode_runs_jobs_in_this_process_and_stop_waits_for_the_running_one(make_app):
    app = make_app()
    engine = engine_of(app)
    supervisor = process_launcher.supervisor(app, mode="thread")
    ids = [enqueue(app, worker_jobs.record, index) for index in range(5)]
    kinds_while_running = []

    def scenario():
        support.wait_until(lambda: len(runtime_support.finished_ids(engine)) == 5)
        kinds_while_running.extend(runtime_support.kinds(engine))
        sleeper = enqueue(app, worker_jobs.sleep, "last", 1)
        support.wait_until(lambda: runtime_support.runs(engine, "worker_test.sleep"))
        return sleeper  # stop() now, with the sleep job running

    sleeper = supervise(supervisor, scenario)

    assert kinds_while_running == ["Dispatcher", "Supervisor(thread)", "Worker"]
    assert runtime_support.finished_ids(engine) == {*ids, sleeper}
    assert {run.pid for run in runtime_support.runs(engine)} == {os.getpid()}
    (sleep_run,) = runtime_support.runs(engine, "worker_test.sleep")
    assert sleep_run.finished_at is not None
    assert runtime_support.processes(engine) == []
    assert support.count(engine, CLAIMED) == 0


def test_a_job_enqueued_in_the_process_wakes_its_idle_worker_without_waiting_for_a_poll(
    make_app,
):
    app = make_app(
        SOLIDQ_WORKERS=[{"queues": "*", "threads": 1, "polling_interval": 5}],
    )
    engine = engine_of(app)
    supervisor = process_launcher.supervisor(app, mode="thread", only="worker")
    polled = threading.Event()

    # On every engine: the worker may claim through an engine of its own.
    def after_execute(conn, cursor, statement, parameters, context, executemany):
        worker_thread = threading.current_thread().name.startswith("solidq-worker")
        if worker_thread and "solidq_ready_executions" in statement:
            polled.set()

    sa.event.listen(sa.Engine, "after_cursor_execute", after_execute)

    def scenario():
        # The worker polled once and found nothing: it sleeps for its 5 s polling interval.
        assert polled.wait(30)
        started = time.monotonic()
        enqueue(app, worker_jobs.record, "wake")
        support.wait_until(lambda: runtime_support.runs(engine), timeout=4)
        return time.monotonic() - started

    try:
        latency = supervise(supervisor, scenario)
    finally:
        sa.event.remove(sa.Engine, "after_cursor_execute", after_execute)

    assert latency < 0.5
    assert len(runtime_support.finished_ids(engine)) == 1


def test_a_job_scheduled_in_the_process_runs_at_its_time_though_every_poll_is_5_seconds_apart(
    make_app,
):
    app = make_app(
        SOLIDQ_WORKERS=[{"queues": "*", "threads": 1, "polling_interval": 5}],
        SOLIDQ_DISPATCHERS=[{"polling_interval": 5}],
    )
    engine = engine_of(app)
    supervisor = process_launcher.supervisor(app, mode="thread")
    worker_polled = threading.Event()
    dispatcher_polled = threading.Event()

    def after_execute(conn, cursor, statement, parameters, context, executemany):
        thread = threading.current_thread().name
        if thread.startswith("solidq-worker") and "solidq_ready_executions" in statement:
            worker_polled.set()
        if thread.startswith("solidq-dispatcher") and "min(" in statement:
            dispatcher_polled.set()  # its last query: it found nothing scheduled

    sa.event.listen(sa.Engine, "after_cursor_execute", after_execute)

    def scenario():
        assert worker_polled.wait(30)
        assert dispatcher_polled.wait(30)
        job_id = enqueue(app, worker_jobs.record, "soon", wait=1)
        (run,) = support.wait_until(lambda: runtime_support.runs(engine), timeout=4)
        return run, support.rows(engine, JOBS, JOBS.c.id == job_id)[0]

    try:
        run, job = supervise(supervisor, scenario)
    finally:
        sa.event.remove(sa.Engine, "after_cursor_execute", after_execute)

    assert job.scheduled_at <= run.started_at < job.scheduled_at + dt.timedelta(seconds=0.5)


def test_signals_fire_for_perform_start_perform_retry_discard_and_fail(make_app):
    app = make_app()
    engine = engine_of(app)
    supervisor = process_launcher.supervisor(app, mode="thread")
    received: list[tuple[str, str, int | None, str | None]] = []
    lock = threading.Lock()

    def receiver(name):
        def receive(sender, job=None, error=None, **payload):
            with lock:
                received.append(
                    (
                        name,
                        sender.job_name,
                        job.provider_job_id,
                        None if error is None else type(error).__name__,
                    )
                )

        return receive

    receivers = {
        signal: receiver(name)
        for name, signal in [
            ("perform_start", signals.perform_start),
            ("perform", signals.perform),
            ("retry", signals.retry),
            ("discard", signals.discard),
            ("fail", signals.fail),
        ]
    }
    for signal, receive in receivers.items():
        signal.connect(receive)
    try:
        done = enqueue(app, worker_jobs.record, "ok")
        flaky = enqueue(app, worker_jobs.flaky, "f")
        unwanted = enqueue(app, worker_jobs.unwanted, "u")
        failing = enqueue(app, worker_jobs.fail, "x")

        supervise(
            supervisor,
            lambda: support.wait_until(
                lambda: (
                    support.count(engine, FAILED) == 2
                    and runtime_support.finished_ids(engine) == {done, unwanted}
                )
            ),
        )
    finally:
        for signal, receive in receivers.items():
            signal.disconnect(receive)

    by_job = collections.defaultdict(list)
    for name, job_name, job_id, error in received:
        by_job[job_id].append((name, job_name, error))
    assert by_job[done] == [
        ("perform_start", "worker_test.record", None),
        ("perform", "worker_test.record", None),
    ]
    assert by_job[flaky] == [
        ("perform_start", "worker_test.flaky", None),
        ("retry", "worker_test.flaky", "Flaky"),
        ("perform_start", "worker_test.flaky", None),
        ("retry", "worker_test.flaky", "Flaky"),
        ("perform_start", "worker_test.flaky", None),
        ("fail", "worker_test.flaky", "Flaky"),
    ]
    assert by_job[unwanted] == [
        ("perform_start", "worker_test.unwanted", None),
        ("discard", "worker_test.unwanted", "NotWanted"),
    ]
    assert by_job[failing] == [
        ("perform_start", "worker_test.fail", None),
        ("fail", "worker_test.fail", "ValueError"),
    ]
    assert set(by_job) == {done, flaky, unwanted, failing}


def test_without_preserve_finished_jobs_finished_jobs_are_deleted_and_failed_ones_kept(make_app):
    app = make_app(SOLIDQ_PRESERVE_FINISHED_JOBS=False)
    engine = engine_of(app)
    supervisor = process_launcher.supervisor(app, mode="thread")
    for index in range(3):
        enqueue(app, worker_jobs.record, index)
    enqueue(app, worker_jobs.unwanted, "u")
    failing = enqueue(app, worker_jobs.fail, "x")

    supervise(supervisor, lambda: support.wait_until(lambda: support.count(engine, JOBS) == 1))

    assert [row.id for row in support.rows(engine, JOBS)] == [failing]
    assert [row.job_id for row in support.rows(engine, FAILED)] == [failing]
    assert len(runtime_support.runs(engine)) == 5
    assert support.count(engine, READY) == 0
    assert support.count(engine, CLAIMED) == 0


def test_a_thread_mode_supervisor_runs_in_a_background_thread(make_app):
    app = make_app()
    engine = engine_of(app)
    supervisor = process_launcher.supervisor(app, mode="thread")
    job_id = enqueue(app, worker_jobs.record, "background")
    errors = []

    def run():
        try:
            supervisor.run()
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            errors.append(error)

    thread = threading.Thread(target=run, name="test-supervisor")
    thread.start()
    try:
        support.wait_until(
            lambda: errors or runtime_support.finished_ids(engine) == {job_id}, timeout=15
        )
    finally:
        supervisor.stop()
        thread.join(30)
    if errors:
        raise errors[0]
    assert runtime_support.processes(engine) == []
