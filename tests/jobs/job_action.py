"""Jobs for the tests of acting on jobs (tests/operations/test_job_actions.py,
tests/cli/test_job_commands.py), and the body of the spawned processes that retry at once
(:func:`retry_in_process`).

A job raises while its note (or, collecting, its first call's account) is in :data:`FAILURES`,
with the exception class given there, so a test decides which runs fail and with what error,
and a retried job can then run and finish. Each run is noted in :data:`PERFORMED`.

Every name starts with ``job_action_test.`` (job names are process-wide).
"""

from __future__ import annotations

import traceback
import typing as t

from flask_solidq import coalesce
from flask_solidq import limits_concurrency
from flask_solidq import retry_on
from tests import support
from tests.support import solidq

if t.TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.synchronize import Event

#: note -> the exception class a run of a job with that note raises.
FAILURES: dict[str, type[Exception]] = {}

#: (job name, note) of every run in this process.
PERFORMED: list[tuple[str, t.Any]] = []

#: A concurrency-limited job's slot lasts this long (longer than any test).
DURATION = 120.0


class Flaky(Exception):
    """Raised by :func:`retried`, which retries on it once."""


def run(job_name: str, note: str) -> None:
    """Note the run; raise the exception :data:`FAILURES` gives ``note``, if any."""
    PERFORMED.append((job_name, note))
    failure = FAILURES.get(note)
    if failure is not None:
        raise failure(f"{job_name} failed on purpose for {note}")


@solidq.job(name="job_action_test.task")
def task(note: str) -> None:
    run("job_action_test.task", note)


@solidq.job(name="job_action_test.other")
def other(note: str) -> None:
    run("job_action_test.other", note)


@solidq.job(name="job_action_test.retried")
@retry_on(Flaky, wait=0, attempts=2)
def retried(note: str) -> None:
    run("job_action_test.retried", note)


@solidq.job(name="job_action_test.limited")
@limits_concurrency(key=lambda account, *_: account, to=1, duration=DURATION)
def limited(account: str, note: str) -> None:
    run("job_action_test.limited", note)


@solidq.job(name="job_action_test.limited_other")
@limits_concurrency(key=lambda account, *_: account, to=1, duration=DURATION)
def limited_other(account: str, note: str) -> None:
    run("job_action_test.limited_other", note)


@solidq.job(name="job_action_test.dedupe")
@coalesce(key=lambda account, *_: account)
def dedupe(account: str, note: str) -> None:
    run("job_action_test.dedupe", note)


@solidq.job(name="job_action_test.collect")
@coalesce(key=lambda account, *_: account, on_conflict="collect", max_calls=10)
def collect(calls: list[t.Any]) -> None:
    PERFORMED.append(("job_action_test.collect", [call.args for call in calls]))
    failure = FAILURES.get(calls[0].args[0])
    if failure is not None:
        raise failure(f"job_action_test.collect failed on purpose for {calls[0].args[0]}")


#: How many jobs each ``solidq.retry`` call of :func:`retry_in_process` names.
CHUNK = 50


def _chunks(ids: list[int]) -> list[list[int]]:
    return [ids[start : start + CHUNK] for start in range(0, len(ids), CHUNK)]


def retry_in_process(
    database_url: str, ids: list[int] | None, go: Event, connection: Connection
) -> None:
    """Build an app, send "ready", wait for ``go``, then retry: the jobs ``ids``
    (``solidq.retry``, :data:`CHUNK` at a time, the newest first, to meet a ``retry_all``
    going the other way), or every failed job (``solidq.retry_all``, for None). Sends back
    how many it retried, or ("failed", traceback)."""
    try:
        app = support.create_app(database_url)
        with app.app_context():
            app.extensions["solidq"].check_tables()
            connection.send("ready")
            if not go.wait(60):
                raise RuntimeError("the go event never came")
            if ids is None:
                retried = solidq.retry_all()
            else:
                retried = sum(solidq.retry(chunk) for chunk in reversed(_chunks(ids)))
            app.extensions["solidq"].dispose()
            support.db.engines[None].dispose()
        connection.send(retried)
    except BaseException:  # noqa: BLE001 - reported to the test
        connection.send(("failed", traceback.format_exc()))
    finally:
        connection.close()
