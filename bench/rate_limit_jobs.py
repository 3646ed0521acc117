"""The rate-limited jobs and the app that ``bench/rate_limit_drain.py`` runs ``flask solidq work``
with.

    SOLIDQ_BENCH_DATABASE_URL=sqlite:////tmp/x/bench.db \\
        flask --app bench.rate_limit_jobs:create_app solidq work

One job definition per case of the benchmark, ``bench.rate.<case>`` (e.g. ``bench.rate.to10-b6``),
each declaring ``limits_rate(to=, per=, burst=, key="global")``, so each case has a budget of its
own. The worker registers them at start, as an app that imports its jobs does, rather than on
its first claim of one (which would take the late-definition path of the claim): hence an app
factory of this module's own, :func:`bench.app.create_app` (same environment variables, same
``bench.record_start``, ``SOLIDQ_BENCH_RUN_LOG``) with this module imported.

Each run of a case job stores one row in ``bench_rate_admissions``: its job id, the time the
limit admitted it (``solidq_claimed_executions.created_at`` of its claim, read inside the job:
the very clock value the claim charged the budget with) and ``time.time()`` when it started.

``SOLIDQ_BENCH_DEFER_LOG``, when set: a file to which every worker process appends one line per
claim that deferred jobs over their limit (from the ``defer_rate_limited`` signal):
``time.time()`` then the deferred job ids, space-separated.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
import typing as t

import sqlalchemy as sa
from flask import Flask
from flask import current_app

from bench import app as bench_app
from bench import common
from flask_solidq import current_job
from flask_solidq import limits_rate
from flask_solidq import models
from flask_solidq import signals
from flask_solidq.storage import db as solidq_db

CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)

metadata = sa.MetaData()

#: One row per run of a case job: job id, admission (claim) time and start time, as
#: ``time.time()``-style seconds.
admissions = sa.Table(
    "bench_rate_admissions",
    metadata,
    sa.Column("job_id", bench_app.JobId, nullable=False, index=True),
    sa.Column("claimed_at", sa.Double(), nullable=False),
    sa.Column("started_at", sa.Double(), nullable=False),
)


@dataclasses.dataclass(frozen=True)
class Case:
    """One limit to drain a backlog under, and the dispatcher's polling interval."""

    name: str
    to: int
    per: float
    burst: int
    dispatcher_poll: float = 1.0
    why: str = ""

    @property
    def interval(self) -> float:
        """``T = per / (to - burst + 1)``, seconds between admissions once the burst is spent."""
        return self.per / (self.to - self.burst + 1)

    @property
    def ideal(self) -> float:
        """How fast a backlog drains under the limit, jobs/s: ``(to - burst + 1) / per``."""
        return (self.to - self.burst + 1) / self.per

    def backlog(self) -> int:
        """N: the burst plus two seconds' worth of ideal drain, kept within 30 to 60 jobs (the
        range the seed measured), so the slow cases drain for 2 s or more and the fast ones
        (ideal 49 jobs/s and up) are capped at 60 jobs, about a second or less."""
        return min(60, max(30, self.burst + math.ceil(2 * self.ideal)))

    @property
    def job_name(self) -> str:
        return f"bench.rate.{self.name}"


CASES = (
    Case("to10-b6", 10, 1.0, 6, 1.0, "seed: keeps up at 5/s"),
    Case("to100-b20", 100, 1.0, 20, 0.1, "seed: needs burst 20"),
    Case("to100-b11", 100, 1.0, 11, 0.1, "seed: falls behind"),
    Case("to2-b2", 2, 1.0, 2),
    Case("to10-b2", 10, 1.0, 2),
    Case("to50-b2", 50, 1.0, 2),
    Case("to100-b2", 100, 1.0, 2),
    Case("to1-b1", 1, 1.0, 1),
    Case("to5-b1", 5, 1.0, 1),
    Case("to10-b1", 10, 1.0, 1),
    Case("to50-b1", 50, 1.0, 1),
    # Not run by default: the seed's own simulation, where both drain at 100/s.
    Case("to110-b11", 110, 1.0, 11, 0.1, "seed simulation: falls behind"),
    Case("to119-b20", 119, 1.0, 20, 0.1, "seed simulation: keeps up"),
)
DEFAULT_CASES = tuple(case.name for case in CASES[:11])
BY_NAME = {case.name: case for case in CASES}


def create_tables(engine: sa.Engine) -> None:
    """Create ``bench_rate_admissions`` (before any worker starts)."""
    metadata.create_all(engine)


def _engine() -> sa.Engine:
    return t.cast(sa.Engine, current_app.extensions["solidq"].engine)


def _record_admission() -> None:
    """Store when this job's claim was admitted and when it started."""
    started_at = time.time()
    job_id = current_job.provider_job_id
    with solidq_db.write(_engine()) as connection:
        claimed_at = connection.execute(
            sa.select(CLAIMED.c.created_at).where(CLAIMED.c.job_id == job_id)
        ).scalar_one()
        connection.execute(
            admissions.insert(),
            {"job_id": job_id, "claimed_at": claimed_at.timestamp(), "started_at": started_at},
        )


def _define(case: Case) -> t.Any:
    """The job definition of ``case``, importable as ``bench.rate_limit_jobs:<attribute>``."""
    attribute = "rate_" + case.name.replace("-", "_")

    def perform() -> None:
        _record_admission()

    perform.__name__ = perform.__qualname__ = attribute
    perform.__doc__ = f"Record the admission of a job limited to {case.to} per {case.per:g} s."
    limited = limits_rate(to=case.to, per=case.per, burst=case.burst, key="global")(perform)
    job = common.solidq.job(name=case.job_name)(limited)
    globals()[attribute] = job
    return job


JOBS: dict[str, t.Any] = {case.name: _define(case) for case in CASES}

_defer_log: dict[int, int] = {}
_defer_log_lock = threading.Lock()


def _log_deferrals(sender: t.Any, job_ids: t.Sequence[int] = (), **_: t.Any) -> None:
    """Append ``time job_id job_id ...`` to ``SOLIDQ_BENCH_DEFER_LOG`` (one ``write`` per
    claim that deferred, to an ``O_APPEND`` descriptor)."""
    pid = os.getpid()
    with _defer_log_lock:
        descriptor = _defer_log.get(pid)
        if descriptor is None:
            descriptor = os.open(
                os.environ["SOLIDQ_BENCH_DEFER_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )
            _defer_log[pid] = descriptor
    line = " ".join([f"{time.time():.6f}", *(str(job_id) for job_id in job_ids)])
    os.write(descriptor, f"{line}\n".encode())


def create_app() -> Flask:
    """:func:`bench.app.create_app`, with the case jobs registered (by importing this module)
    and the deferral log when ``SOLIDQ_BENCH_DEFER_LOG`` is set."""
    app = bench_app.create_app()
    if os.environ.get("SOLIDQ_BENCH_DEFER_LOG"):
        signals.defer_rate_limited.connect(_log_deferrals)
    return app
