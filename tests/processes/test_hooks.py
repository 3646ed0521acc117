"""Hooks for the tools apps already use: lifecycle hooks in each forked (or threaded) process,
``SOLIDQ_ON_THREAD_ERROR``, outcome signals sent once the outcome committed, the operation
signals (claim, release, prune, thread error), and an error tracker fed by ``signals.fail``.

The process tests run ``flask solidq work`` on :mod:`tests.apps.hook_app`, whose hooks and
receivers write JSON lines to a file the test reads (that module is never imported here: it
registers hooks and receivers process-wide)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import pathlib
import signal
import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask
from flask import current_app
from flask import has_app_context

from flask_solidq import SolidQ
from flask_solidq import signals
from flask_solidq.config import OnWorkerDeath
from flask_solidq.lifecycle import HookFailed
from flask_solidq.lifecycle import ProcessInfo
from flask_solidq.operations import claim
from flask_solidq.operations import processes as process_roll
from flask_solidq.operations import release
from flask_solidq.processes.outage import Outage
from flask_solidq.processes.poller import Poller
from flask_solidq.processes.thread_errors import ThreadActivity
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import FAILED
from tests.support.runtime import PROCESSES
from tests.support.runtime import READY
from tests.support.runtime import Launcher
from tests.support.runtime import WorkProcess

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

EVERY_QUEUE = claim.QueueSelector(("*",))


# -- helpers -------------------------------------------------------------------------------


def start_hook_app(
    launcher: Launcher, *args: str, config: dict[str, t.Any] | None = None
) -> tuple[WorkProcess, pathlib.Path]:
    """Start ``flask solidq work *args`` on the hook app; return it and its hooks' log."""
    index = len(launcher.started)
    hook_log = launcher.directory / f"hooks-{index}.jsonl"
    work = WorkProcess(
        launcher.database_url,
        ["work", *args],
        config={"HOOK_TEST_LOG": str(hook_log), **(config or {})},
        log_path=launcher.directory / f"work-{index}.log",
        app_module="tests.apps.hook_app",
    )
    launcher.started.append(work)
    return work, hook_log


def lines(hook_log: pathlib.Path, event: str | None = None) -> list[dict[str, t.Any]]:
    """The hook app's lines (of ``event``) so far, in the order they were written."""
    if not hook_log.exists():
        return []
    found = [json.loads(line) for line in hook_log.read_text().splitlines(keepends=True)]
    return [line for line in found if event is None or line["event"] == event]


def wait_for_lines(
    hook_log: pathlib.Path, event: str, count: int, timeout: float = 30
) -> list[dict[str, t.Any]]:
    """Wait until the log holds at least ``count`` lines of ``event``; return them."""
    support.wait_until(lambda: len(lines(hook_log, event)) >= count, timeout=timeout)
    return lines(hook_log, event)


def enqueue(app: Flask, definition: t.Any, *args: t.Any) -> int:
    with app.app_context():
        return t.cast(int, definition.perform_later(*args).provider_job_id)


def stop(work: WorkProcess) -> None:
    """SIGTERM, and the supervisor exits 0."""
    work.signal(signal.SIGTERM)
    assert work.wait(30) == 0, work.output()


@contextlib.contextmanager
def sent(signal_: t.Any) -> t.Iterator[list[dict[str, t.Any]]]:
    """The payloads ``signal_`` sends inside the block."""
    payloads: list[dict[str, t.Any]] = []

    def receiver(sender: t.Any, **payload: t.Any) -> None:
        payloads.append(payload)

    with signal_.connected_to(receiver):
        yield payloads


def register_process(engine: sa.Engine, name: str, *, heartbeat_at: dt.datetime) -> int:
    with engine.begin() as connection:
        return int(
            connection.execute(
                PROCESSES.insert().values(
                    kind="Worker", name=name, pid=4321, last_heartbeat_at=heartbeat_at
                )
            ).inserted_primary_key[0]
        )


def claim_all(app: Flask, engine: sa.Engine, process_id: int, *values: str) -> list[int]:
    """Enqueue a job per value and claim them all for ``process_id``; return their ids."""
    job_ids = [enqueue(app, worker_jobs.record, value) for value in values]
    claimed = claim.claim(engine, EVERY_QUEUE, len(values), process_id)
    assert sorted(job.id for job in claimed) == sorted(job_ids)
    return job_ids


# -- lifecycle hooks in real processes -----------------------------------------------------

RECURRING = {
    "hook_tick": {
        "job": "tests.jobs.worker:record",
        "schedule": "every hour",
        "args": ["tick"],
    }
}


@pytest.mark.processes
def test_lifecycle_hooks_run_in_each_forked_process_inside_the_app_context(app, engine, launcher):
    work, hook_log = start_hook_app(
        launcher, "--processes", "2", config={"SOLIDQ_RECURRING": RECURRING}
    )
    wait_for_lines(hook_log, "on_worker_start", 2)
    job_id = enqueue(app, worker_jobs.record, "after-start")
    support.wait_until(lambda: job_id in runtime_support.finished_ids(engine), timeout=30)
    stop(work)

    started = lines(hook_log, "on_process_start")
    assert sorted(line["kind"] for line in started) == [
        "Dispatcher",
        "Scheduler",
        "Worker",
        "Worker",
    ]
    # One forked child each, none of them the supervisor; the hook ran in its own process.
    pids = [line["pid"] for line in started]
    assert len(set(pids)) == 4 and work.pid not in pids
    assert all(line["process_pid"] == line["pid"] for line in started)
    hooks = [line for line in lines(hook_log) if line["event"].startswith("on_")]
    assert {line["app"] for line in hooks} == {"solidq_test_app"}
    # on_process_start before the process registered; on_worker_start after, and before the
    # worker claimed anything; on_worker_stop before it deregistered.
    assert not any(line["registered"] for line in started)
    workers = {line["pid"] for line in started if line["kind"] == "Worker"}
    for pid in workers:
        moments = [line["event"] for line in lines(hook_log) if line["pid"] == pid]
        assert moments[:2] == ["on_process_start", "on_worker_start"], moments
        assert moments[-1] == "on_worker_stop", moments
    for moment in ("on_worker_start", "on_worker_stop"):
        seen = lines(hook_log, moment)
        assert {line["pid"] for line in seen} == workers
        assert all(line["kind"] == "Worker" and line["registered"] for line in seen)
    claims = lines(hook_log, "claim")
    assert claims and all(line["pid"] in workers for line in claims)


@pytest.mark.processes
def test_in_thread_mode_the_hooks_run_once_per_process_thread(app, engine, launcher):
    work, hook_log = start_hook_app(launcher, "--mode", "thread")
    wait_for_lines(hook_log, "on_worker_start", 1)
    runtime_support.wait_for_kinds(engine, ["Dispatcher", "Supervisor(thread)", "Worker"])
    stop(work)

    started = lines(hook_log, "on_process_start")
    assert sorted(line["kind"] for line in started) == ["Dispatcher", "Worker"]
    assert {line["pid"] for line in lines(hook_log)} == {work.pid}
    assert len({line["thread"] for line in started}) == 2
    (worker,) = [line for line in started if line["kind"] == "Worker"]
    for moment in ("on_worker_start", "on_worker_stop"):
        (line,) = lines(hook_log, moment)
        assert (line["name"], line["thread"]) == (worker["name"], worker["thread"])


@pytest.mark.processes
def test_a_raising_process_start_hook_stops_its_process_which_the_supervisor_replaces(
    app, engine, launcher
):
    work, hook_log = start_hook_app(launcher, config={"HOOK_TEST_RAISE": "on_process_start"})
    (raised,) = wait_for_lines(hook_log, "raised", 1)
    wait_for_lines(hook_log, "on_worker_start", 1)
    job_id = enqueue(app, worker_jobs.record, "replaced")
    support.wait_until(lambda: job_id in runtime_support.finished_ids(engine), timeout=30)
    stop(work)

    # The worker that raised never registered nor worked; its replacement did.
    worker_starts = [
        line for line in lines(hook_log, "on_process_start") if line["kind"] == "Worker"
    ]
    assert len(worker_starts) == 2
    failed, replacement = worker_starts
    assert failed["name"] == raised["name"] and failed["pid"] != replacement["pid"]
    (worker_start,) = lines(hook_log, "on_worker_start")
    assert worker_start["pid"] == replacement["pid"]
    output = work.output()
    assert (
        "HookFailed: The on_process_start hook tests.apps.hook_app.process_started raised" in output
    )
    assert "InjectedFailure: on_process_start refuses to start" in output
    assert "exited with status 1; replacing it" in output


# -- SOLIDQ_ON_THREAD_ERROR in real processes ----------------------------------------------


@pytest.mark.processes
def test_on_thread_error_hears_a_failed_store_of_outcomes_and_the_job_still_finishes(
    app, engine, launcher
):
    work, hook_log = start_hook_app(launcher, config={"HOOK_TEST_BREAK_FINISH": True})
    job_id = enqueue(app, worker_jobs.record, "stored-late")
    support.wait_until(lambda: job_id in runtime_support.finished_ids(engine), timeout=30)
    (worker,) = runtime_support.processes(engine, "Worker")
    stop(work)

    (hook,) = lines(hook_log, "thread_error_hook")
    assert hook["error_class"] == "InjectedFailure"
    assert hook["message"] == "injected: the first store of outcomes fails"
    (sent_signal,) = lines(hook_log, "thread_error_signal")
    assert sent_signal["where"] == "finish"
    assert sent_signal["process"] == worker.name
    assert sent_signal["error_class"] == "InjectedFailure"
    assert hook["thread"] == sent_signal["thread"] == "solidq-finisher"
    assert "couldn't store 1 job outcomes; trying again" in work.output()


@pytest.mark.processes
def test_a_thread_error_hook_that_raises_is_logged_and_its_thread_carries_on(app, engine, launcher):
    config = {"HOOK_TEST_BREAK_FINISH": True, "HOOK_TEST_THREAD_ERROR_HOOK_RAISES": True}
    work, hook_log = start_hook_app(launcher, config=config)
    first = enqueue(app, worker_jobs.record, "first")
    support.wait_until(lambda: first in runtime_support.finished_ids(engine), timeout=30)
    second = enqueue(app, worker_jobs.record, "second")
    support.wait_until(lambda: second in runtime_support.finished_ids(engine), timeout=30)
    stop(work)

    assert len(lines(hook_log, "thread_error_hook")) == 1
    output = work.output()
    assert "SOLIDQ_ON_THREAD_ERROR raised on an error of worker-" in output
    assert "the error tracker is down too" in output


# -- outcome signals after the commit, in real processes -----------------------------------


@pytest.mark.processes
def test_outcome_signals_are_sent_once_the_outcome_is_stored(app, engine, launcher):
    work, hook_log = start_hook_app(launcher)
    failing = enqueue(app, worker_jobs.fail, "x")
    flaky = enqueue(app, worker_jobs.flaky, "f")
    unwanted = enqueue(app, worker_jobs.unwanted, "u")
    wait_for_lines(hook_log, "tracked_failure", 2)
    wait_for_lines(hook_log, "discard", 1)
    stop(work)

    failures = {
        line["contexts"]["job"]["provider_job_id"]: line
        for line in lines(hook_log, "tracked_failure")
    }
    assert set(failures) == {failing, flaky}
    assert all(line["failure_stored"] for line in failures.values())
    retries = lines(hook_log, "retry")
    assert [(line["provider_job_id"], line["executions"]) for line in retries] == [
        (flaky, 1),
        (flaky, 2),
    ]
    assert all(line["retry_stored"] and line["wait"] == 0 for line in retries)
    assert all(line["error_class"] == "Flaky" for line in retries)
    (discard,) = lines(hook_log, "discard")
    assert discard["provider_job_id"] == unwanted
    assert discard["error_class"] == "NotWanted" and discard["finish_stored"]
    # Sent by the finisher, after its commit, not by the thread that ran the job.
    assert {line["thread"] for line in [*failures.values(), *retries, discard]} == {
        "solidq-finisher"
    }


@pytest.mark.processes
def test_an_error_tracker_connected_to_fail_gets_the_failure_with_its_job_context(
    app, engine, launcher
):
    work, hook_log = start_hook_app(launcher)
    job_id = enqueue(app, worker_jobs.flaky, "tracked")
    (event,) = wait_for_lines(hook_log, "tracked_failure", 1)
    stop(work)

    (row,) = support.rows(engine, runtime_support.JOBS, runtime_support.JOBS.c.id == job_id)
    assert event["exception"] == {"type": "Flaky", "value": "flaky run 3"}
    assert event["tags"] == {"job": "worker_test.flaky", "queue": "default"}
    assert event["contexts"]["job"] == {
        "job_id": row.active_job_id,
        "provider_job_id": job_id,
        "executions": 3,
    }
    assert event["failure_stored"]
    assert [row.job_id for row in support.rows(engine, FAILED)] == [job_id]


# -- lifecycle hooks in this process -------------------------------------------------------


class OneStop(Poller):
    """A process that registers as a worker (so the worker hooks run) and stops at its first
    poll, or raises at its first poll and stops at the second."""

    kind = "Worker"

    def __init__(self, app: Flask, *, raise_first: bool = False) -> None:
        super().__init__(app)
        self.raise_first = raise_first
        self.polls = 0

    def poll(self) -> float:
        self.polls += 1
        if self.raise_first and self.polls == 1:
            raise RuntimeError("the first poll fails")
        self.stop()
        return 0.0


@pytest.fixture
def make_app(database_url: str) -> t.Iterator[t.Callable[..., Flask]]:
    """Build apps on ``database_url`` with their own ``SolidQ`` object (``extension=``) or the
    suite's, and ``config``; their rows are deleted and engines closed afterwards."""
    apps: list[Flask] = []

    def make(extension: SolidQ | None = None, **config: t.Any) -> Flask:
        app = Flask("solidq_hooks_app")
        app.config.update(
            TESTING=True,
            SQLALCHEMY_DATABASE_URI=database_url,
            SOLIDQ_DASHBOARD=False,
            SOLIDQ_PROCESS_HEARTBEAT_INTERVAL=60,
            **config,
        )
        support.db.init_app(app)
        (extension or support.solidq).init_app(app)
        apps.append(app)
        return app

    yield make
    for app in apps:
        with app.app_context():
            support.delete_all_rows(app.extensions["solidq"].engine)
        runtime_support.dispose_engines(app)


def recorder(seen: list[tuple[str, t.Any]], moment: str) -> t.Callable[[ProcessInfo], None]:
    """A hook recording its moment, the process, and what it finds in the app context."""

    def hook(process: ProcessInfo) -> None:
        engine = current_app.extensions["solidq"].engine
        with engine.connect() as connection:
            registered = connection.scalar(
                sa.select(sa.func.count())
                .select_from(PROCESSES)
                .where(PROCESSES.c.name == process.name)
            )
        seen.append((moment, (process.kind, has_app_context(), current_app.name, registered)))

    return hook


def test_hooks_run_at_start_after_boot_and_at_stop_in_the_app_context(make_app):
    extension = SolidQ()
    seen: list[tuple[str, t.Any]] = []
    extension.on_process_start(recorder(seen, "process_start"))
    extension.on_worker_start(recorder(seen, "worker_start"))
    extension.on_worker_stop(recorder(seen, "worker_stop"))
    app = make_app(extension)

    process = OneStop(app)
    process.run()

    expected = ("Worker", True, "solidq_hooks_app")
    assert seen == [
        ("process_start", (*expected, 0)),  # before registering
        ("worker_start", (*expected, 1)),
        ("worker_stop", (*expected, 1)),  # before deregistering
    ]
    assert runtime_support.processes(process.engine) == []


def test_the_hooks_of_one_solidq_object_run_for_every_app_it_serves(database_url, make_app):
    extension = SolidQ()
    names: list[str] = []

    @extension.on_process_start
    def started(process: ProcessInfo) -> None:
        names.append(current_app.config["APP_LABEL"])

    first, second = make_app(extension, APP_LABEL="first"), make_app(extension, APP_LABEL="second")
    assert first.extensions["solidq"].lifecycle_hooks is second.extensions["solidq"].lifecycle_hooks
    OneStop(first).run()
    OneStop(second).run()
    assert names == ["first", "second"]
    other = make_app()  # the suite's own SolidQ object: hooks of its own (none)
    OneStop(other).run()
    assert names == ["first", "second"]


def test_a_raising_start_hook_stops_the_process_before_it_registers(make_app):
    extension = SolidQ()

    @extension.on_process_start
    def refuse(process: ProcessInfo) -> None:
        raise ValueError("no client")

    app = make_app(extension)
    process = OneStop(app)
    with pytest.raises(HookFailed) as info:
        process.run()
    assert str(info.value) == (
        "The on_process_start hook tests.processes.test_hooks"
        ".test_a_raising_start_hook_stops_the_process"
        f"_before_it_registers.<locals>.refuse raised ValueError: no client; Worker {process.name}"
        " stops."
    )
    assert isinstance(info.value.__cause__, ValueError)
    assert process.polls == 0 and process.process_id is None


def test_a_raising_worker_start_hook_stops_the_worker_which_deregisters_without_stop_hooks(
    make_app,
):
    extension = SolidQ()
    stopped: list[str] = []
    extension.on_worker_start(lambda process: 1 / 0)
    extension.on_worker_stop(lambda process: stopped.append(process.name))
    app = make_app(extension)
    process = OneStop(app)
    with pytest.raises(HookFailed, match="on_worker_start hook .* raised ZeroDivisionError"):
        process.run()
    assert process.polls == 0 and stopped == []
    assert runtime_support.processes(process.engine) == []


def test_a_raising_stop_hook_fails_the_process_after_it_deregistered(make_app):
    extension = SolidQ()
    later: list[str] = []

    @extension.on_worker_stop
    def flush(process: ProcessInfo) -> None:
        raise ConnectionError("tracker unreachable")

    extension.on_worker_stop(lambda process: later.append(process.name))
    app = make_app(extension)
    process = OneStop(app)
    with pytest.raises(HookFailed, match="on_worker_stop hook .*flush raised ConnectionError"):
        process.run()
    assert later == []  # the hooks after a raising one don't run
    assert runtime_support.processes(process.engine) == []


def test_a_lifecycle_hook_must_be_callable():
    with pytest.raises(TypeError, match="@solidq.on_worker_start registers a function"):
        SolidQ().on_worker_start("not a function")  # type: ignore[arg-type]


# -- SOLIDQ_ON_THREAD_ERROR in this process ------------------------------------------------


def test_on_thread_error_must_be_callable_or_none(make_app):
    with pytest.raises(TypeError, match="SOLIDQ_ON_THREAD_ERROR must be None or a callable"):
        make_app(SolidQ(), SOLIDQ_ON_THREAD_ERROR="sentry_sdk.capture_exception")
    app = make_app(SolidQ(), SOLIDQ_ON_THREAD_ERROR=None)
    assert app.extensions["solidq"].settings.on_thread_error is None


def test_a_poll_error_goes_to_on_thread_error_and_the_signal_in_the_app_context(make_app):
    heard: list[tuple[BaseException, bool]] = []
    app = make_app(
        SolidQ(), SOLIDQ_ON_THREAD_ERROR=lambda error: heard.append((error, has_app_context()))
    )
    process = OneStop(app, raise_first=True)
    with sent(signals.thread_error) as payloads:
        process.run()

    assert process.polls == 2  # the loop carried on
    ((error, in_context),) = heard
    assert isinstance(error, RuntimeError) and str(error) == "the first poll fails"
    assert in_context
    assert payloads == [{"error": error, "where": ThreadActivity.POLL, "process": process.name}]


def test_an_outage_reports_its_first_error_and_every_other_error_each_time():
    reported: list[tuple[str, ThreadActivity]] = []
    outage = Outage("Worker w", report=lambda error, where: reported.append((str(error), where)))
    lost = sa.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))
    for _ in range(3):
        outage.failed(lost, started=0.0, retry_every=1, where=ThreadActivity.POLL)
    bug = RuntimeError("a bug")
    for _ in range(2):
        assert not outage.failed(bug, started=0.0, retry_every=1, where=ThreadActivity.FINISH)
    assert [where for _, where in reported] == [
        ThreadActivity.POLL,
        ThreadActivity.FINISH,
        ThreadActivity.FINISH,
    ]


# -- operation signals ----------------------------------------------------------------------


def test_a_claim_sends_claim_with_the_process_and_the_jobs_after_it_committed(app, engine):
    process_id = register_process(engine, "worker-claims", heartbeat_at=utcnow())
    job_ids = [enqueue(app, worker_jobs.record, value) for value in ("a", "b")]
    states: list[int] = []

    def receiver(sender: t.Any, **payload: t.Any) -> None:
        states.append(support.count(engine, CLAIMED))

    with sent(signals.claim) as payloads, signals.claim.connected_to(receiver):
        claim.claim(engine, EVERY_QUEUE, 5, process_id)
        claim.claim(engine, EVERY_QUEUE, 5, process_id)  # nothing left: no signal

    assert payloads == [{"process_id": process_id, "job_ids": job_ids, "size": 2}]
    assert states == [2]


def test_a_claim_inside_a_transaction_sends_claim_only_once_it_commits(app, engine):
    process_id = register_process(engine, "worker-transaction", heartbeat_at=utcnow())
    job_id = enqueue(app, worker_jobs.record, "a")
    with sent(signals.claim) as payloads, app.app_context():
        with support.solidq.transaction():
            claim.claim(engine, EVERY_QUEUE, 5, process_id)
            assert payloads == []
        assert payloads == [{"process_id": process_id, "job_ids": [job_id], "size": 1}]


def test_releases_send_release_with_the_process_the_reason_and_the_jobs(app, engine):
    process_id = register_process(engine, "worker-releases", heartbeat_at=utcnow())
    first, second = claim_all(app, engine, process_id, "a", "b")
    third = enqueue(app, worker_jobs.record, "c")
    with sent(signals.release) as payloads:
        assert release.release_all(engine, [process_id]) == 2  # a stopping worker's
        claim.claim(engine, EVERY_QUEUE, 3, process_id)
        assert release.release_strays(engine, process_id, {first}) == 2  # the others
        assert release.release_all(engine, [process_id + 1]) == 0  # none: no signal
        lost = release.handle_lost_claims(
            engine, [process_id], policy=OnWorkerDeath.RELEASE, error="unused"
        )
        assert lost == 1

    assert payloads == [
        {
            "process_id": process_id,
            "reason": release.ReleaseReason.SHUTDOWN,
            "job_ids": [first, second],
            "size": 2,
        },
        {
            "process_id": process_id,
            "reason": release.ReleaseReason.STRAY,
            "job_ids": [second, third],
            "size": 2,
        },
        {
            "process_id": process_id,
            "reason": release.ReleaseReason.PROCESS_GONE,
            "job_ids": [first],
            "size": 1,
        },
    ]
    assert payloads[0]["reason"] == "shutdown"
    assert support.count(engine, CLAIMED) == 0
    assert support.count(engine, READY) == 3


def test_pruning_sends_prune_and_release_for_a_dead_workers_claims(app, engine):
    silent_since = utcnow() - dt.timedelta(hours=1)
    dead = register_process(engine, "worker-dead", heartbeat_at=silent_since)
    alive = register_process(engine, "worker-alive", heartbeat_at=utcnow())
    job_ids = claim_all(app, engine, dead, "a", "b")

    with sent(signals.prune) as pruned, sent(signals.release) as released:
        rows = process_roll.prune_dead(
            engine, threshold=60, exclude=None, policy=OnWorkerDeath.RELEASE
        )
        assert (
            process_roll.prune_dead(
                engine, threshold=60, exclude=None, policy=OnWorkerDeath.RELEASE
            )
            == []
        )

    assert [row.id for row in rows] == [dead]
    assert pruned == [{"process_ids": [dead], "names": ["worker-dead"], "size": 1}]
    assert [(p["process_id"], p["reason"], sorted(p["job_ids"])) for p in released] == [
        (dead, release.ReleaseReason.PROCESS_GONE, sorted(job_ids))
    ]
    assert [row.id for row in runtime_support.processes(engine)] == [alive]
    assert sorted(row.job_id for row in support.rows(engine, READY)) == sorted(job_ids)


def test_pruning_with_the_fail_policy_sends_prune_and_no_release(app, engine):
    dead = register_process(engine, "worker-failed", heartbeat_at=utcnow() - dt.timedelta(hours=1))
    claim_all(app, engine, dead, "a")
    with sent(signals.prune) as pruned, sent(signals.release) as released:
        process_roll.prune_dead(engine, threshold=60, exclude=None, policy=OnWorkerDeath.FAIL)
    assert [payload["names"] for payload in pruned] == [["worker-failed"]]
    assert released == []
    assert support.count(engine, FAILED) == 1


def test_a_raising_receiver_of_an_operation_signal_is_logged_and_the_operation_stands(
    app, engine, caplog
):
    process_id = register_process(engine, "worker-raising", heartbeat_at=utcnow())
    claim_all(app, engine, process_id, "a")

    def raising(sender: t.Any, **payload: t.Any) -> None:
        raise RuntimeError("receiver bug")

    with signals.release.connected_to(raising):
        assert release.release_all(engine, [process_id]) == 1
    assert support.count(engine, READY) == 1
    (record,) = [r for r in caplog.records if "receiver of the release signal" in r.getMessage()]
    assert record.exc_info is not None and str(record.exc_info[1]) == "receiver bug"
