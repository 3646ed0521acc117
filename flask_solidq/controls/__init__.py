"""The controls: concurrency limits, rate limits and coalescing.

Each control is a declaration (a decorator with validated options, stored on the job class)
plus hooks at named points of a job's life (:class:`~flask_solidq.controls.base.HookPoint`).
The operations call every control at each point through the functions below and never name
one: a new control is a new module with a :class:`~flask_solidq.controls.base.Control` added to
:data:`CONTROLS`.
"""

from __future__ import annotations

import typing as t

from flask_solidq.controls import concurrency
from flask_solidq.controls import rate_limit
from flask_solidq.controls.base import Control
from flask_solidq.controls.base import Dispatched

if t.TYPE_CHECKING:
    import sqlalchemy as sa

    from flask_solidq.definitions.job import Job
    from flask_solidq.operations.rows import JobRef

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


def finish(engine: sa.Engine, jobs: list[JobRef]) -> None:
    """Run every control's FINISH hook, after the outcomes of ``jobs`` were committed."""
    if jobs:
        for control in CONTROLS:
            control.finish(engine, jobs)
