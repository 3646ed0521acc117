"""Jobs for the 429 process tests (:mod:`tests.controls.rate_limit.test_rate_limit_429_processes`),
run by real `flask solidq work` processes on the rate-limit app. Each run leaves a row in
``solidq_test_rate_runs`` (:func:`tests.jobs.rate_limit_process.record_run`: its admission,
by its claim's stamp, and its start, by this host's clock at the top of the run).

The limit admits one job a second (``burst=1``), and a claim up to 250 ms before the next
admission is charged ahead for it: the job waits on its worker's thread for its moment. So a
test that enqueues a job inside the 250 ms before the budget's next admission gets it claimed,
and held by a worker, before it starts.
"""

from __future__ import annotations

import datetime as dt
import threading
import typing as t

import sqlalchemy as sa
from flask import current_app

from flask_solidq import RateLimited
from flask_solidq import current_job
from flask_solidq import limits_rate
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import JOBS
from flask_solidq.timing import utcnow
from tests.jobs.rate_limit_process import RUNS
from tests.jobs.rate_limit_process import record_run
from tests.support import solidq

NAME = "rate_429_test.call"
#: The budget every job here charges.
KEY = f"{NAME}/global"
#: What the API's 429 says to wait, in seconds.
PAUSE = 2.0
#: The job name of the row the told job leaves at the moment it hears 429.
TOLD = "rate_429_test.told"
#: How often the told job looks for a job claimed ahead, in seconds.
LOOK_EVERY = 0.005


@solidq.job(name=NAME)
@limits_rate(to=2, per=2, burst=1, key="global")
def call(note: str, told_within: float | None = None) -> None:
    """Record the run. With ``told_within``, the API answers the first run 429: as soon as
    another job of the budget is claimed ahead (waiting on a worker's thread for its moment),
    and at the latest ``told_within`` seconds after this job's admission; the job records
    that moment (a row named :data:`TOLD`, its value saying whether a job was waiting) and
    raises."""
    record_run(NAME, note)
    engine = t.cast(sa.Engine, current_app.extensions["solidq"].engine)
    if told_within is None or _told_before(engine):
        return
    deadline = _admitted_at(engine) + dt.timedelta(seconds=told_within)
    waiting = False
    while not waiting and utcnow() < deadline:
        waiting = _claimed_ahead(engine)
        if not waiting:
            threading.Event().wait(LOOK_EVERY)
    record_run(TOLD, "ahead" if waiting else "none-ahead")
    raise RateLimited(retry_after=PAUSE)


def _admitted_at(engine: sa.Engine) -> dt.datetime:
    with engine.connect() as connection:
        return t.cast(
            dt.datetime,
            connection.scalar(
                sa.select(CLAIMED.c.created_at).where(
                    CLAIMED.c.job_id == current_job.provider_job_id
                )
            ),
        )


def _told_before(engine: sa.Engine) -> bool:
    with engine.connect() as connection:
        return bool(
            connection.scalar(
                sa.select(sa.func.count())
                .select_from(RUNS)
                .where(RUNS.c.job_name == TOLD, RUNS.c.job_id == current_job.provider_job_id)
            )
        )


def _claimed_ahead(engine: sa.Engine) -> bool:
    """Whether a job of the budget is claimed for a moment still ahead."""
    query = (
        sa.select(CLAIMED.c.created_at)
        .join(JOBS, JOBS.c.id == CLAIMED.c.job_id)
        .where(JOBS.c.class_name == NAME)
    )
    with engine.connect() as connection:
        stamps = connection.scalars(query).all()
    now = utcnow()
    return any(stamp > now for stamp in stamps)
