"""A back-off holds at once, with real `flask solidq work` processes (two workers of three
threads each) on every backend: between an API's 429 and the end of its ``Retry-After`` no job
of the budget starts, in any process, and a job claimed ahead of its moment before the 429
(waiting on a worker's thread) is held back at its start. Likewise for ``back_off`` called
from outside any job. Starts are the jobs' own clocks at the top of their runs, on this host,
as is the moment the 429 was heard.

The jobs are in :mod:`tests.jobs.rate_limit_429_process`: one admission a second, so a job
enqueued inside the 250 ms before the next admission is claimed ahead for it, and the 429
comes while it waits.
"""

from __future__ import annotations

import datetime as dt
import pathlib
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.timing import utcnow
from tests import support
from tests.controls.rate_limit.test_rate_limit_processes import FAILED
from tests.controls.rate_limit.test_rate_limit_processes import Workers
from tests.controls.rate_limit.test_rate_limit_processes import all_finished
from tests.controls.rate_limit.test_rate_limit_processes import enqueue_all
from tests.controls.rate_limit.test_rate_limit_processes import runs
from tests.jobs import rate_limit_429_process as jobs
from tests.jobs.rate_limit_process import RUNS
from tests.support.concurrency import CLAIMED

if t.TYPE_CHECKING:
    from flask import Flask

pytestmark = pytest.mark.processes

PAUSE = dt.timedelta(seconds=jobs.PAUSE)
#: When the second job is enqueued: this long after the first one's admission, just inside
#: the 250 ms before the budget's next one in which a claim is charged ahead, so the claim
#: (which commits after the enqueue) is charged ahead and the job waits for its moment.
ENQUEUE_AFTER = dt.timedelta(seconds=0.76)
#: The told job hears 429 at the latest this long after its admission: 170 ms for the enqueue
#: and the claim, 70 ms for the pause's write to commit before the waiting job's moment.
TOLD_WITHIN = 0.93
#: The workers poll this often, so a job enqueued inside that window is claimed in it.
POLLING_INTERVAL = 0.01
DEADLINE = 30.0


@pytest.fixture
def workers(app: Flask, database_url: str, tmp_path: pathlib.Path) -> t.Iterator[Workers]:
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
    RUNS.create(engine, checkfirst=True)
    workers = Workers(database_url, tmp_path, engine)
    try:
        yield workers
    finally:
        for work in workers.started:
            work.kill()
        with engine.begin() as connection:
            connection.execute(RUNS.delete())


def first_run_admitted_at(engine: sa.Engine, note: str) -> dt.datetime:
    """Wait for the run of the job noted ``note``; return its admission."""

    def admitted() -> dt.datetime | None:
        found = [run for run in runs(engine, jobs.NAME) if run.value == note]
        return found[0].admitted_at if found else None

    return t.cast(dt.datetime, support.wait_until(admitted, timeout=DEADLINE, interval=0.01))


def wait_past(moment: dt.datetime) -> None:
    support.wait_until(lambda: utcnow() >= moment, timeout=DEADLINE, interval=0.005)


def claimed_ahead(engine: sa.Engine, job_id: int) -> bool:
    """Whether job ``job_id`` is claimed for a moment still ahead (waiting on a thread)."""
    found = support.rows(engine, CLAIMED, CLAIMED.c.job_id == job_id)
    return bool(found) and found[0].created_at > utcnow()


def drained(engine: sa.Engine, job_ids: list[int]) -> None:
    support.wait_until(lambda: all_finished(engine, job_ids), timeout=DEADLINE, interval=0.05)
    assert support.rows(engine, FAILED) == []


def test_no_job_of_the_budget_starts_between_a_429_and_its_retry_after(app, workers):
    engine = workers.engine
    work = workers.start(POLLING_INTERVAL)
    (told,) = enqueue_all(app, jobs.call, [("told", TOLD_WITHIN)])
    admitted = first_run_admitted_at(engine, "told")
    wait_past(admitted + ENQUEUE_AFTER)
    waiting, later_one = enqueue_all(app, jobs.call, [("waiting",), ("later",)])
    drained(engine, [told, waiting, later_one])
    workers.stop(work)

    (heard,) = runs(engine, jobs.TOLD)
    assert heard.value == "ahead", "the 429 came while a job was claimed ahead"
    starts = sorted(run.started_at for run in runs(engine, jobs.NAME))
    after = [start for start in starts if start > heard.started_at]
    assert len(after) == 3  # the waiting job, the later one and the told job's second run
    assert min(after) - heard.started_at >= PAUSE, [s - heard.started_at for s in after]


def test_a_back_off_from_outside_holds_back_a_job_claimed_ahead(app, workers):
    engine = workers.engine
    work = workers.start(POLLING_INTERVAL)
    (first,) = enqueue_all(app, jobs.call, [("first",)])
    admitted = first_run_admitted_at(engine, "first")
    wait_past(admitted + ENQUEUE_AFTER)
    (waiting,) = enqueue_all(app, jobs.call, [("waiting",)])
    support.wait_until(
        lambda: claimed_ahead(engine, waiting) or utcnow() >= admitted + PAUSE / 2,
        timeout=DEADLINE,
        interval=0.002,
    )
    assert claimed_ahead(engine, waiting), "the job is claimed ahead when the back-off comes"
    backed_off_at = utcnow()
    with app.app_context():
        support.solidq.rate_limiter.back_off(jobs.KEY, seconds=jobs.PAUSE)
    drained(engine, [first, waiting])
    workers.stop(work)

    (run,) = [run for run in runs(engine, jobs.NAME) if run.value == "waiting"]
    assert run.started_at - backed_off_at >= PAUSE
