"""What a claim hands back (:class:`ClaimBatch`), and the two small decisions it makes about
its jobs on the way: which limited candidates fit the worker's idle threads, and when a job
charged ahead of the clock may start. Kept apart from :mod:`~flask_solidq.operations.claim`,
which runs the statements.
"""

from __future__ import annotations

import dataclasses
import time
import typing as t

if t.TYPE_CHECKING:
    from flask_solidq.controls.base import ClaimClock
    from flask_solidq.controls.base import Deferral
    from flask_solidq.values import ClaimedJob


@dataclasses.dataclass(frozen=True)
class ClaimBatch:
    """What one claim did: the jobs it claimed, in queue order, and those its controls
    deferred (moved to scheduled executions instead).

    ``limited``: the ids of the claimed jobs a control checked (rate-limited jobs it
    admitted), which must start at once, or, for those in ``starts``, at their moment.
    ``held_back``: how many candidates were left ready because the claim's ``limited_cap``
    was reached (0 without a cap).
    """

    jobs: list[ClaimedJob]
    deferrals: list[Deferral]
    limited: tuple[int, ...] = ()
    held_back: int = 0
    #: The jobs charged ahead of the clock (``charge_ahead``), by id: the ``time.monotonic()``
    #: before which each must not start.
    starts: dict[int, float] = dataclasses.field(default_factory=dict)


def within_cap(
    jobs: list[ClaimedJob], checked: frozenset[str], cap: int
) -> tuple[list[ClaimedJob], int]:
    """The jobs up to the first of a ``checked`` definition past the ``cap``-th, and how many
    are left out (that one and every later one: they stay ready, in their order)."""
    seen = 0
    for index, job in enumerate(jobs):
        if job.class_name in checked:
            seen += 1
            if seen > cap:
                return jobs[:index], len(jobs) - index
    return jobs, 0


def starts(clock: ClaimClock, claimed: set[int]) -> dict[int, float]:
    """The ``time.monotonic()`` before which each job charged ahead must not start: read
    after the claim's clock, so it is never before the moment charged."""
    if not clock.ahead:
        return {}
    now, monotonic = clock(), time.monotonic()
    return {
        job_id: monotonic + (at - now).total_seconds()
        for job_id, at in clock.ahead.items()
        if job_id in claimed
    }
