"""The controls: concurrency limits, rate limits and coalescing.

Each control is a declaration (a decorator with validated options, stored on the job class)
plus hooks at the moments of a job's life (:class:`~flask_solidq.controls.base.Control`). The
operations call every control at each moment through the functions below and never name one:
a new control is a new module with a :class:`~flask_solidq.controls.base.Control` added to
:data:`CONTROLS`.
"""

from __future__ import annotations

import typing as t

from flask_solidq.controls import concurrency
from flask_solidq.controls import rate_limit
from flask_solidq.controls.base import ClaimClock
from flask_solidq.controls.base import Control
from flask_solidq.controls.base import Deferral
from flask_solidq.controls.base import Dispatched

if t.TYPE_CHECKING:
    import sqlalchemy as sa

    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob
    from flask_solidq.values import JobRef

#: Every control, in the order their hooks run.
CONTROLS: list[Control] = [concurrency.CONTROL, rate_limit.CONTROL]


def stamp(job: Job, row: dict[str, t.Any]) -> None:
    """Run every control's ENQUEUE hook over one job's row."""
    for control in CONTROLS:
        control.stamp(job, row)


def act_on_dispatch(row: dict[str, t.Any]) -> bool:
    """Whether any control's DISPATCH hook may hold back the job stored as ``row``."""
    return any(control.acts_on_dispatch(row) for control in CONTROLS)


def dispatch(connection: sa.Connection, jobs: list[JobRef]) -> Dispatched:
    """Run every control's DISPATCH hook; say which jobs may become ready and which were
    discarded."""
    discarded: set[int] = set()
    for control in CONTROLS:
        if not jobs:
            break
        jobs, dropped = control.dispatch(connection, jobs)
        discarded |= dropped
    return Dispatched(jobs, discarded)


def checked_at_claim() -> frozenset[str]:
    """The names of the job definitions (registered in this process) whose jobs some
    control's CLAIM hook may defer; empty when claims need run no hook."""
    names: frozenset[str] = frozenset()
    for control in CONTROLS:
        names |= control.checked_at_claim()
    return names


def claim(connection: sa.Connection, jobs: list[ClaimedJob], clock: ClaimClock) -> list[Deferral]:
    """Run every control's CLAIM hook over the candidates, in queue order; return the jobs
    that must wait instead of running now."""
    deferrals: list[Deferral] = []
    for control in CONTROLS:
        deferred = {deferral.job.id for deferral in deferrals}
        candidates = [job for job in jobs if job.id not in deferred]
        if not candidates:
            break
        deferrals.extend(control.claim(connection, candidates, clock))
    return deferrals


def after_claim(engine: sa.Engine, deferrals: list[Deferral]) -> None:
    """Run every control's hook for jobs a committed claim deferred."""
    if deferrals:
        for control in CONTROLS:
            control.after_claim(engine, deferrals)


def finish(engine: sa.Engine, jobs: list[JobRef]) -> None:
    """Run every control's FINISH hook, after the outcomes of ``jobs`` were committed."""
    if jobs:
        for control in CONTROLS:
            control.finish(engine, jobs)


def maintain(engine: sa.Engine, batch_size: int) -> None:
    """Run every control's MAINTAIN hook (the dispatcher's failsafe)."""
    for control in CONTROLS:
        control.maintain(engine, batch_size)
