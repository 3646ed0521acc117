"""Jobs for the rate-limit process tests (``limits_rate`` in real `flask solidq work` processes).

Each run leaves one row in ``solidq_test_rate_runs``, a table of the tests' own in the queue's
database: which job, charged to which budget, when it was admitted and when it started, in
which process. ``admitted_at`` is read inside the job from its own claim row: the claim's
``created_at`` is the very clock value the GCRA admission used, so the tests check the
guarantee on the times the limit itself saw. ``started_at`` is the job's own clock at the top
of its run.

A declaration is fixed at import, so the limits the property test draws from are a family of
definitions made here up front, one per ``(to, per, burst)``, each named after its limit.
Every name starts with ``rate_process_test.`` (job names are process-wide).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import typing as t

import sqlalchemy as sa
from flask import current_app

from flask_solidq import RateLimited
from flask_solidq import current_job
from flask_solidq import limits_rate
from flask_solidq import models
from flask_solidq.models.base import UTCDateTime
from flask_solidq.storage import database_clock
from flask_solidq.storage import db as solidq_db
from flask_solidq.timing import utcnow
from tests.support import solidq

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)

RUNS = sa.Table(
    "solidq_test_rate_runs",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_name", sa.String(100), nullable=False),
    sa.Column("job_id", sa.BigInteger, nullable=False),
    sa.Column("budget_key", sa.String(255)),
    sa.Column("value", sa.String(100)),
    sa.Column("admitted_at", UTCDateTime(), nullable=False),
    sa.Column("started_at", UTCDateTime(), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
)


class Limit(t.NamedTuple):
    """A ``limits_rate`` declaration's numbers."""

    to: int
    per: float
    burst: int

    @property
    def interval(self) -> float:
        """``T = per / (to - burst + 1)``: how far apart a spent budget admits."""
        return self.per / (self.to - self.burst + 1)


def record_run(
    job_name: str,
    value: object,
    *,
    clock: t.Callable[[sa.Connection], dt.datetime] | None = None,
) -> None:
    """Record this run: its admission (its claim's ``created_at``), its start (this
    process's clock at the top of the run, or ``clock`` read on the run's connection), its
    budget."""
    started_at = utcnow()
    job_id = current_job.provider_job_id
    engine = t.cast(sa.Engine, current_app.extensions["solidq"].engine)
    query = (
        sa.select(CLAIMED.c.created_at, JOBS.c.rate_limit_key)
        .join(JOBS, JOBS.c.id == CLAIMED.c.job_id)
        .where(CLAIMED.c.job_id == job_id)
    )
    with solidq_db.write(engine) as connection:
        if clock is not None:
            started_at = clock(connection)
        claim = connection.execute(query).one()
        connection.execute(
            RUNS.insert(),
            {
                "job_name": job_name,
                "job_id": job_id,
                "budget_key": claim.rate_limit_key,
                "value": str(value),
                "admitted_at": claim.created_at,
                "started_at": started_at,
                "pid": os.getpid(),
            },
        )


# The family the property test draws from: one global budget per limit, per from 0.3 to
# 1.5 seconds, to from 2 to 8. Drawn once, from a fixed seed, so the test process and every
# worker define the same jobs.

FAMILY_SEED = 20240611
FAMILY_SIZE = 8


def _draw_family(seed: int, size: int) -> list[Limit]:
    rng = random.Random(seed)
    family: list[Limit] = []
    while len(family) < size:
        to = rng.randint(2, 8)
        limit = Limit(to, round(rng.uniform(0.3, 1.5), 2), rng.randint(1, to))
        if limit not in family:
            family.append(limit)
    return family


def job_name_of(limit: Limit) -> str:
    return f"rate_process_test.to{limit.to}_per{round(limit.per * 1000)}ms_burst{limit.burst}"


def _define_limited(limit: Limit) -> t.Any:
    """A job limited to ``limit`` on one global budget."""
    name = job_name_of(limit)

    def limited(value: object) -> None:
        record_run(name, value)

    # A top-level name, as if written out in this module.
    identifier = name.removeprefix("rate_process_test.")
    limited.__name__ = limited.__qualname__ = identifier
    job = solidq.job(name=name)(
        limits_rate(to=limit.to, per=limit.per, burst=limit.burst, key="global")(limited)
    )
    globals()[identifier] = job
    return job


#: limit -> its job definition.
FAMILY: dict[Limit, t.Any] = {
    limit: _define_limited(limit) for limit in _draw_family(FAMILY_SEED, FAMILY_SIZE)
}


# One definition per case of the other tests.

#: A quiet budget admits 3 at once, then one every 0.4 s.
QUIET = Limit(to=4, per=0.8, burst=3)


@solidq.job(name="rate_process_test.quiet")
@limits_rate(to=QUIET.to, per=QUIET.per, burst=QUIET.burst, key=lambda key, _value: key)
def quiet(key: str, value: object) -> None:
    record_run("rate_process_test.quiet", value)


#: Each account's budget: 3 in any 0.9 s, 2 at once, then one every 0.45 s.
KEYED = Limit(to=3, per=0.9, burst=2)


@solidq.job(name="rate_process_test.keyed")
@limits_rate(to=KEYED.to, per=KEYED.per, burst=KEYED.burst, key=lambda account, _value: account)
def keyed(account: str, value: object) -> None:
    record_run("rate_process_test.keyed", value)


#: One job a second: a backlog of n waits for n - 1 seconds at least.
SLOW = Limit(to=1, per=1.0, burst=1)


@solidq.job(name="rate_process_test.slow")
@limits_rate(to=SLOW.to, per=SLOW.per, burst=SLOW.burst, key="global")
def slow(value: object) -> None:
    record_run("rate_process_test.slow", value)


@solidq.job(name="rate_process_test.unlimited")
def unlimited(value: object) -> None:
    record_run("rate_process_test.unlimited", value)


#: The clock-skew test's limit: 5 in any second, one every 0.2 s.
SKEWED = Limit(to=5, per=1.0, burst=1)


@solidq.job(name="rate_process_test.skewed")
@limits_rate(to=SKEWED.to, per=SKEWED.per, burst=SKEWED.burst, key="global")
def skewed(value: object) -> None:
    """Records its start by the database's clock: its worker's own clock may be skewed."""
    record_run("rate_process_test.skewed", value, clock=database_clock.now)


#: The throttled test's limit: 2 at once, then one every 0.3 s.
THROTTLED = Limit(to=3, per=0.6, burst=2)
#: How long the throttled job's fake API asks to wait (``Retry-After``), in seconds.
THROTTLED_PAUSE = 1.0


@solidq.job(name="rate_process_test.throttled")
@limits_rate(to=THROTTLED.to, per=THROTTLED.per, burst=THROTTLED.burst, key="global")
def throttled(value: object, fail_times: int = 0) -> None:
    """Records each run; a fake API answers 429 to the job's first ``fail_times`` runs (counted
    in the runs' table, which every worker process shares)."""
    record_run("rate_process_test.throttled", value)
    engine = t.cast(sa.Engine, current_app.extensions["solidq"].engine)
    with solidq_db.write(engine) as connection:
        ran = connection.scalar(
            sa.select(sa.func.count())
            .select_from(RUNS)
            .where(RUNS.c.job_id == current_job.provider_job_id)
        )
    if ran <= fail_times:
        raise RateLimited(retry_after=THROTTLED_PAUSE)
