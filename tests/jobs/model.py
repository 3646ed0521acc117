"""Jobs of the model test (tests/controls/test_model.py): one definition for every combination
of the three controls the library accepts, each recording its runs in ``solidq_test_model_runs``.

A combination is ``(rate, coalesce, concurrency)``: ``limits_rate(to=3, per=1)`` or none;
``coalesce`` with ``"discard"``, ``"replace"`` or ``"collect"`` (``max_calls=3``, so collecting
jobs fill and seal) or none; ``limits_concurrency`` with ``on_conflict="block"`` or
``"discard"`` or none. Every key is the call's first argument, so the calls of one key share
their coalesce key, concurrency key and budget. The library refuses ``on_conflict="discard"``
beside a rate limit, or beside a coalesce that replaces or collects (ValueError at definition):
those combinations are left out, the 18 others are all here.

Every call is ``(key, token, mode, seconds)``: ``token`` names the call (the test accounts for
each), ``mode`` says how its job's first run ends (``"ok"``; ``"flaky"``: :class:`Flaky`,
which ``retry_on`` retries; ``"fail"``: :class:`Broken`, which fails the job for the test to
retry or discard by hand; ``"429"``, for rate-limited definitions only: the API says "too many
requests", ``RateLimited(retry_after=RETRY_AFTER)``), ``seconds`` how long the run sleeps. A
job fails (or hears 429) only on its first run (a run row for its job id already there means a
later one), so every job can finish.

Each run leaves one row, written as it starts and updated as it ends: the job row, the tokens
it ran, the times it started and ended (``time.time()``, one machine; a 429's run ends at the
moment it raises), its claim's
``created_at`` (the clock value its rate limit admitted it by) and its keys as stored.

Every name starts with ``model_test.`` (job names are process-wide).
"""

from __future__ import annotations

import json
import os
import threading
import time
import typing as t

import sqlalchemy as sa
from flask import current_app

from flask_solidq import RateLimited
from flask_solidq import coalesce
from flask_solidq import current_job
from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from flask_solidq import models
from flask_solidq import retry_on
from flask_solidq.models.base import UTCDateTime
from flask_solidq.storage import db as solidq_db
from tests.support import solidq

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)

RATE_TO = 3
RATE_PER = 1.0
MAX_CALLS = 3
#: A lease far longer than any run: a slot comes back by its holder's outcome, not by expiry.
CONCURRENCY_DURATION = 60.0
#: What a 429 says to wait, in seconds: longer than a run, so jobs charged ahead of the clock
#: and jobs queued for a thread meet the pause.
RETRY_AFTER = 0.6
#: The two queues definitions alternate between, so the test can pause one.
QUEUES = ("model_a", "model_b")

RUNS = sa.Table(
    "solidq_test_model_runs",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_name", sa.String(100), nullable=False),
    sa.Column("job_id", sa.BigInteger, nullable=False),
    # SQLite gives a deleted row's id to the next job: the job's own id tells them apart.
    sa.Column("active_job_id", sa.String(36), nullable=False),
    sa.Column("tokens", sa.Text, nullable=False),
    sa.Column("budget_key", sa.String(255)),
    sa.Column("concurrency_key", sa.String(255)),
    sa.Column("admitted_at", UTCDateTime()),
    sa.Column("started", sa.Double, nullable=False),
    sa.Column("finished", sa.Double),
    sa.Column("outcome", sa.String(20), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
)


class Flaky(Exception):
    """A first run's failure that ``retry_on`` retries."""


class Broken(Exception):
    """A first run's failure nothing retries: the job fails."""


class Combination(t.NamedTuple):
    """Which controls a definition has."""

    rate: bool
    coalesce: str | None
    concurrency: str | None
    concurrency_to: int
    retry_wait: float
    queue: str

    @property
    def name(self) -> str:
        return (
            f"model_test.r{int(self.rate)}_c{self.coalesce or 'none'}"
            f"_k{self.concurrency or 'none'}{self.concurrency_to if self.concurrency else ''}"
        )


def is_accepted(rate: bool, coalesce_mode: str | None, concurrency: str | None) -> bool:
    """Whether the library accepts these controls together."""
    if concurrency != "discard":
        return True
    return not rate and coalesce_mode in (None, "discard")


def _combinations() -> list[Combination]:
    found = []
    index = 0
    for rate in (False, True):
        for coalesce_mode in (None, "discard", "replace", "collect"):
            for concurrency in (None, "block", "discard"):
                if is_accepted(rate, coalesce_mode, concurrency):
                    found.append(
                        Combination(
                            rate,
                            coalesce_mode,
                            concurrency,
                            # Discard limits of one slot, where a conflict is likeliest.
                            concurrency_to=1 if concurrency == "discard" else 1 + index % 2,
                            retry_wait=(0.0, 0.4)[(index + 1) // 2 % 2],
                            queue=QUEUES[index // 3 % 2],
                        )
                    )
                    index += 1
    return found


COMBINATIONS = _combinations()


# What a run does.


def _engine() -> sa.Engine:
    return t.cast(sa.Engine, current_app.extensions["solidq"].engine)


def _start_run(job_name: str, tokens: list[str]) -> tuple[int, bool]:
    """Insert this run's row; return its id and whether the job ran before."""
    job_id = current_job.provider_job_id
    started = time.time()
    keys = (
        sa.select(JOBS.c.rate_limit_key, JOBS.c.concurrency_key, CLAIMED.c.created_at)
        .select_from(JOBS)
        .outerjoin(CLAIMED, CLAIMED.c.job_id == JOBS.c.id)
        .where(JOBS.c.id == job_id)
    )
    with solidq_db.write(_engine()) as connection:
        before = connection.scalar(
            sa.select(sa.func.count()).select_from(RUNS).where(RUNS.c.job_id == job_id)
        )
        row = connection.execute(keys).one()
        run_id = connection.execute(
            RUNS.insert(),
            {
                "job_name": job_name,
                "job_id": job_id,
                "active_job_id": current_job.job_id,
                "tokens": json.dumps(tokens),
                "budget_key": row.rate_limit_key,
                "concurrency_key": row.concurrency_key,
                "admitted_at": row.created_at,
                "started": started,
                "outcome": "running",
                "pid": os.getpid(),
            },
        ).inserted_primary_key[0]
    return int(run_id), bool(before)


def _end_run(run_id: int, outcome: str) -> None:
    _end_with(_engine(), run_id, outcome, time.time())


def _hear_429(run_id: int) -> t.NoReturn:
    """End the run as the API's 429 comes back: its end is the moment of the raise, written by
    another thread beside it (written first, the write's round trip would fall between the
    recorded 429 and the one the worker hears, and starts in it would count against the
    pause). The process waits for that thread before it exits."""
    told_at = time.time()
    engine = _engine()
    threading.Thread(
        target=lambda: _end_with(engine, run_id, "rate_limited", told_at), daemon=False
    ).start()
    raise RateLimited(retry_after=RETRY_AFTER)


def _end_with(engine: sa.Engine, run_id: int, outcome: str, finished: float) -> None:
    with solidq_db.write(engine) as connection:
        connection.execute(
            RUNS.update().where(RUNS.c.id == run_id).values(finished=finished, outcome=outcome)
        )


def run(job_name: str, calls: list[tuple[t.Any, ...]]) -> None:
    """Record a run of ``calls`` (each ``(key, token, mode, seconds)``), sleep, and end it as
    the first run's modes say."""
    run_id, ran_before = _start_run(job_name, [str(call[1]) for call in calls])
    time.sleep(max(float(call[3]) for call in calls))
    modes = {call[2] for call in calls}
    if not ran_before and "429" in modes:
        _hear_429(run_id)
    if not ran_before and "fail" in modes:
        _end_run(run_id, "broken")
        raise Broken(f"{job_name}: first run fails on purpose")
    if not ran_before and "flaky" in modes:
        _end_run(run_id, "flaky")
        raise Flaky(f"{job_name}: first run fails on purpose, retried")
    _end_run(run_id, "ok")


def _define(combination: Combination) -> t.Any:
    name = combination.name

    if combination.coalesce == "collect":

        def body(calls: list[t.Any]) -> None:
            run(name, [tuple(call.args) for call in calls])

    else:

        def body(key: str, token: str, mode: str, seconds: float) -> None:  # type: ignore[misc]
            run(name, [(key, token, mode, seconds)])

    identifier = name.removeprefix("model_test.")
    body.__name__ = body.__qualname__ = identifier
    target: t.Any = retry_on(Flaky, attempts=3, wait=combination.retry_wait, jitter=0)(body)
    if combination.concurrency:
        target = limits_concurrency(
            to=combination.concurrency_to,
            key=lambda key, *_: key,
            duration=CONCURRENCY_DURATION,
            on_conflict=combination.concurrency,
        )(target)
    if combination.coalesce == "collect":
        target = coalesce(key=lambda key, *_: key, on_conflict="collect", max_calls=MAX_CALLS)(
            target
        )
    elif combination.coalesce:
        target = coalesce(key=lambda key, *_: key, on_conflict=combination.coalesce)(target)
    if combination.rate:
        target = limits_rate(to=RATE_TO, per=RATE_PER, key=lambda key, *_: key)(target)
    job = solidq.job(name=name, queue=combination.queue)(target)
    globals()[identifier] = job
    return job


#: combination -> its job definition.
DEFINITIONS: dict[Combination, t.Any] = {
    combination: _define(combination) for combination in COMBINATIONS
}


#: The name of :func:`batch_done`'s runs in ``solidq_test_model_runs``.
BATCH_DONE = "model_test.batch_done"


@solidq.job(name=BATCH_DONE)
def batch_done(batch: t.Any) -> None:
    """The ``on_finish`` callback of the driver's batches: one run row whose tokens are the
    batch's id and its counts as this run read them (total, completed, failed)."""
    tokens = [f"batch:{batch.id}", *map(str, (batch.total_jobs, batch.completed_jobs))]
    run_id, _ran_before = _start_run(BATCH_DONE, [*tokens, str(batch.failed_jobs)])
    _end_run(run_id, "ok")
