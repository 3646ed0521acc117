"""The app `flask solidq work` runs in the hook tests: ``flask --app tests.apps.hook_app``.

The worker app (:mod:`tests.apps.worker_app`), plus a lifecycle hook of each kind, an
``SOLIDQ_ON_THREAD_ERROR`` hook, a Sentry-like recorder of failures and receivers of the
outcome and operation signals. Each writes one JSON line to the file named by ``HOOK_TEST_LOG``
(in ``SOLIDQ_TEST_CONFIG``), in one ``write`` to a file opened for appending, so the lines of
every process and thread land whole and in the order they were written.

Switches, in ``SOLIDQ_TEST_CONFIG``: ``HOOK_TEST_RAISE`` (a lifecycle moment, such as
``"on_process_start"``): the first worker to reach it raises there, once for the whole log;
``HOOK_TEST_BREAK_FINISH``: each worker's first attempt to store outcomes fails;
``HOOK_TEST_THREAD_ERROR_HOOK_RAISES``: the ``SOLIDQ_ON_THREAD_ERROR`` hook raises.
"""

from __future__ import annotations

import json
import os
import threading
import typing as t

import sqlalchemy as sa
from flask import Flask
from flask import current_app

from flask_solidq import models
from flask_solidq import signals
from flask_solidq.lifecycle import ProcessInfo
from flask_solidq.operations import finalize
from tests import support
from tests.jobs import worker  # noqa: F401 - the jobs the tests enqueue
from tests.support import solidq

LOG_KEY = "HOOK_TEST_LOG"
#: The app's settings, set by create_app (before the fork, so every process has them).
SETTINGS: dict[str, t.Any] = {}

PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
JOBS = t.cast(sa.Table, models.JobRecord.__table__)


class InjectedFailure(RuntimeError):
    """What the broken finisher, and the raising hooks, raise."""


def create_app() -> Flask:
    config = json.loads(os.environ.get("SOLIDQ_TEST_CONFIG") or "{}")
    SETTINGS.update(config)
    if config.get("HOOK_TEST_BREAK_FINISH"):
        _break_first_finish()
    return support.create_app(
        os.environ["SOLIDQ_TEST_DATABASE_URL"], SOLIDQ_ON_THREAD_ERROR=on_thread_error, **config
    )


def record(event: str, **fields: t.Any) -> None:
    """Append one line: the event, this process and thread, and ``fields``."""
    line = {
        "event": event,
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
        **fields,
    }
    data = (json.dumps(line, default=str) + "\n").encode()
    descriptor = os.open(SETTINGS[LOG_KEY], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, data)
    finally:
        os.close(descriptor)


def read_log(path: str) -> list[dict[str, t.Any]]:
    """The lines written so far (for the tests)."""
    if not os.path.exists(path):
        return []
    with open(path) as file:
        return [json.loads(line) for line in file if line.endswith("\n")]


def _engine() -> sa.Engine:
    return t.cast(sa.Engine, current_app.extensions["solidq"].engine)


def _count(table: sa.Table, *where: t.Any) -> int:
    with _engine().connect() as connection:
        return int(connection.scalar(sa.select(sa.func.count()).select_from(table).where(*where)))


# Lifecycle hooks.


def _lifecycle(moment: str, process: ProcessInfo) -> None:
    """Record the moment with what the hook can see; raise once if asked to."""
    registered = _count(PROCESSES, PROCESSES.c.name == process.name) == 1
    record(
        moment,
        kind=process.kind,
        name=process.name,
        process_pid=process.pid,
        app=current_app.name,
        registered=registered,
    )
    if SETTINGS.get("HOOK_TEST_RAISE") == moment and process.kind == "Worker":
        if not any(line["event"] == "raised" for line in read_log(SETTINGS[LOG_KEY])):
            record("raised", moment=moment, name=process.name)
            raise InjectedFailure(f"{moment} refuses to start")


@solidq.on_process_start
def process_started(process: ProcessInfo) -> None:
    _lifecycle("on_process_start", process)


@solidq.on_worker_start
def worker_started(process: ProcessInfo) -> None:
    _lifecycle("on_worker_start", process)


@solidq.on_worker_stop
def worker_stopped(process: ProcessInfo) -> None:
    _lifecycle("on_worker_stop", process)


# Thread errors.


def on_thread_error(error: BaseException) -> None:
    """The ``SOLIDQ_ON_THREAD_ERROR`` hook."""
    record("thread_error_hook", error_class=type(error).__name__, message=str(error))
    if SETTINGS.get("HOOK_TEST_THREAD_ERROR_HOOK_RAISES"):
        raise InjectedFailure("the error tracker is down too")


def _break_first_finish() -> None:
    """Make each process's first store of outcomes fail (the finisher tries again)."""
    store = finalize.finalize_all
    broken = {"done": False}

    def finalize_all(*args: t.Any, **kwargs: t.Any) -> t.Any:
        if not broken["done"]:
            broken["done"] = True
            raise InjectedFailure("injected: the first store of outcomes fails")
        return store(*args, **kwargs)

    finalize.finalize_all = finalize_all  # type: ignore[assignment]


@signals.thread_error.connect
def thread_error_sent(sender: object, **payload: t.Any) -> None:
    record(
        "thread_error_signal",
        where=payload["where"].value,
        process=payload["process"],
        error_class=type(payload["error"]).__name__,
    )


# A Sentry-like error tracker, fed by signals.fail.


class ErrorTracker:
    """What an error tracker's SDK keeps of a failed job: the exception, and the job as tags
    and context (never its arguments)."""

    def capture(self, error: BaseException, job: t.Any, provider_job_id: int) -> None:
        event = {
            "exception": {"type": type(error).__name__, "value": str(error)},
            "tags": {"job": type(job).job_name, "queue": job.queue_name},
            "contexts": {
                "job": {
                    "job_id": job.job_id,
                    "provider_job_id": provider_job_id,
                    "executions": job.executions,
                }
            },
            "failure_stored": _count(FAILED, FAILED.c.job_id == provider_job_id) == 1,
        }
        record("tracked_failure", **event)


tracker = ErrorTracker()


@signals.fail.connect
def job_failed(sender: object, *, job: t.Any, error: BaseException, provider_job_id: int) -> None:
    tracker.capture(error, job, provider_job_id)


# The other outcome signals, each with what the database says when it is sent.


@signals.retry.connect
def job_retried(sender: object, *, job: t.Any, error: BaseException, wait: float) -> None:
    # The next attempt may be claimed already; the stored payload counts this one either way.
    with _engine().connect() as connection:
        stored = connection.scalar(
            sa.select(JOBS.c.arguments).where(JOBS.c.id == job.provider_job_id)
        )
    record(
        "retry",
        provider_job_id=job.provider_job_id,
        executions=job.executions,
        wait=wait,
        error_class=type(error).__name__,
        retry_stored=json.loads(stored).get("executions") == job.executions,
    )


@signals.discard.connect
def job_discarded(sender: object, *, job: t.Any, error: BaseException) -> None:
    job_id = job.provider_job_id
    finished = _count(JOBS, JOBS.c.id == job_id, JOBS.c.finished_at.is_not(None)) == 1
    record(
        "discard",
        provider_job_id=job_id,
        error_class=type(error).__name__,
        finish_stored=finished and _count(CLAIMED, CLAIMED.c.job_id == job_id) == 0,
    )


# Operation signals.


@signals.claim.connect
def jobs_claimed(sender: object, **payload: t.Any) -> None:
    record("claim", **payload)
