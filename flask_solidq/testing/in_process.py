"""Run the due jobs in this process, as the dispatcher and a worker would
(:func:`flask_solidq.testing.work_off`).

A test on the real database wants to say "enqueue, then run what is due" without starting a
worker and waiting for it. Each pass does what the processes do, through their own
operations: the dispatcher's poll (the controls' maintenance, then the due scheduled jobs made
ready, or blocked, or coalesced into their open job), a worker's claim (the real
:func:`~flask_solidq.operations.claim.claim_batch`, so rate limits admit or defer, concurrency
limits hold, coalesced jobs start as they would), and each claimed job performed and finalized
as a worker's thread and finisher do (:func:`~flask_solidq.operations.execute.perform_in_app`,
:func:`~flask_solidq.operations.finalize.finalize_all`). Passes go on until one claims
nothing. Nothing sleeps: under :func:`~flask_solidq.testing.clock.frozen_clock`, ``until``
moves the clock from one due time to the next instead.

Claims belong to a registered process, so the call registers one (a worker row named
``work_off``) and removes it before it returns, having put back to ready any claim it still
held: no row is left for a supervisor to prune later, failing jobs with it.
"""

from __future__ import annotations

import datetime as dt
import os
import time
import typing as t

import sqlalchemy as sa
from flask import current_app

from flask_solidq import controls
from flask_solidq.config import Adapter
from flask_solidq.config import parse_queues
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.operations import claim as claim_operation
from flask_solidq.operations import dispatch
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.operations import processes as process_roll
from flask_solidq.operations import release
from flask_solidq.state import SolidQState
from flask_solidq.state import get_state
from flask_solidq.storage import db
from flask_solidq.testing.clock import FrozenClock
from flask_solidq.testing.clock import active_clock
from flask_solidq.timing import as_utc
from flask_solidq.timing import to_seconds
from flask_solidq.values import ProcessKind

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob

#: Jobs claimed at a time: like a worker with this many threads, each claim's jobs run one
#: after another, each finalized before the next starts (so a finished job's concurrency slot
#: goes to the next blocked job at once).
CLAIM_SIZE = 10
#: The most jobs one call performs: past it, a job that enqueues itself again and again (a
#: worker would run it for ever) fails the test instead of hanging it.
MAX_JOBS = 10_000
#: The least ``until`` moves the clock by when the earliest due time has come already (a
#: job deferred to the very moment it was looked at): it can't step in place for ever.
MIN_STEP = dt.timedelta(microseconds=1)


def work_off(
    queues: str | t.Sequence[str] = "*",
    until: dt.datetime | dt.timedelta | float | None = None,
) -> list[Job]:
    """Run the jobs of ``queues`` due now, in this process, through the real dispatch and
    claim; return the jobs it performed (finished, retried, discarded or failed), in order.
    Requires an application context on the database queue (``SOLIDQ_ADAPTER = "solidq"``).

    :param queues: as a worker's ``queues``: ``"*"``, names, ``"prefix*"``, in order.
    :param until: under :func:`frozen_clock` only: a datetime, or a duration from the clock's
        now. The clock steps to each next due time up to ``until`` (a scheduled job, a
        debounce window's end, a deferred job's slot, a retry's wait), working off at each,
        and is left at ``until``.
    :raises RuntimeError: no app context, another adapter, or ``until`` without a frozen clock.
    :raises ValueError: ``until`` is before the clock's now.
    """
    state = get_state()
    if state.adapter is not Adapter.SOLIDQ:
        raise RuntimeError(
            f"work_off() runs jobs of the database queue; this app's SOLIDQ_ADAPTER is"
            f" {state.adapter.value!r} (use perform_enqueued_jobs() with the test adapter)."
        )
    selector = claim_operation.QueueSelector(parse_queues(queues, name="queues"))
    clock, end = _until(until)
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    process_id = _register(state, selector)
    try:
        performed = _work_off_due(app, state, selector, process_id)
        if clock is not None and end is not None:
            performed += _step_until(app, state, selector, process_id, clock, end)
        return performed
    finally:
        release.release_all(state.engine, [process_id])
        process_roll.deregister(state.engine, process_id)


def _until(
    until: dt.datetime | dt.timedelta | float | None,
) -> tuple[FrozenClock | None, dt.datetime | None]:
    """The frozen clock and the moment ``until`` names (None, None without one)."""
    if until is None:
        return None, None
    clock = active_clock()
    if clock is None:
        raise RuntimeError(
            "work_off(until=...) moves the frozen clock: call it inside"
            " `with frozen_clock() as clock:` (without one, work_off() runs what is due now)."
        )
    if not isinstance(until, dt.datetime):
        seconds = to_seconds(until, name="until", allow_zero=True)
        return clock, clock.now() + dt.timedelta(seconds=seconds)
    end = as_utc(until)
    if end < clock.now():
        raise ValueError(
            f"until={end.isoformat()} is before the frozen clock's now"
            f" ({clock.now().isoformat()}): the clock only moves forward."
        )
    return clock, end


def _register(state: SolidQState, selector: claim_operation.QueueSelector) -> int:
    return process_roll.register(
        state.engine,
        kind=ProcessKind.WORKER,
        name=f"work_off-{os.getpid()}",
        pid=os.getpid(),
        supervisor_id=None,
        metadata={"queues": ",".join(selector.queues), "threads": 1, "work_off": True},
    )


def _step_until(
    app: Flask,
    state: SolidQState,
    selector: claim_operation.QueueSelector,
    process_id: int,
    clock: FrozenClock,
    end: dt.datetime,
) -> list[Job]:
    """Move ``clock`` to each next due time up to ``end``, working off at each; leave it at
    ``end``."""
    performed: list[Job] = []
    while True:
        due_at = _next_due_at(state.engine)
        if due_at is None or due_at > end:
            break
        clock.advance(max(due_at - clock.now(), MIN_STEP))
        performed += _work_off_due(app, state, selector, process_id)
    if clock.now() < end:
        clock.advance(end - clock.now())
        performed += _work_off_due(app, state, selector, process_id)
    return performed


def _next_due_at(engine: sa.Engine) -> dt.datetime | None:
    """The earliest scheduled job's due time (a wait, a debounce, a deferral, a retry)."""
    with db.read(engine) as connection:
        due_at = connection.scalar(sa.select(sa.func.min(SCHEDULED.c.scheduled_at)))
    return None if due_at is None else as_utc(due_at)


def _work_off_due(
    app: Flask, state: SolidQState, selector: claim_operation.QueueSelector, process_id: int
) -> list[Job]:
    """The controls' maintenance (as a dispatcher does at its start), then passes of
    dispatch, claim, perform and finalize until one claims nothing."""
    _maintain(state)
    performed: list[Job] = []
    while True:
        _dispatch(state)
        batch = claim_operation.claim_batch(
            state.claim_engine,
            selector,
            CLAIM_SIZE,
            process_id,
            skip_locked=state.settings.use_skip_locked,
            charge_ahead=False,  # a job is admitted only when its budget admits it now
        )
        if not batch.jobs:
            return performed
        for claimed in batch.jobs:
            job = _perform(app, state, process_id, claimed)
            if job is not None:
                performed.append(job)
        if len(performed) > MAX_JOBS:
            raise RuntimeError(
                f"work_off() performed {len(performed)} jobs and more keep coming due: does a"
                " job enqueue itself each time it runs?"
            )


def _maintain(state: SolidQState) -> None:
    """The dispatcher's failsafe, as it runs it at start: expired concurrency semaphores
    deleted and the blocked jobs they held freed (a holder's lease runs out while the test
    moves the clock past its ``duration``)."""
    if any(settings.concurrency_maintenance for settings in state.settings.dispatchers):
        controls.maintain(state.engine, _batch_size(state))


def _dispatch(state: SolidQState) -> None:
    """What a dispatcher's poll does: every due scheduled job made ready (or blocked, or
    coalesced), a batch at a time."""
    batch_size = _batch_size(state)
    skip_locked = state.settings.use_skip_locked
    while dispatch.dispatch_due(state.engine, batch_size, skip_locked=skip_locked) >= batch_size:
        pass


def _batch_size(state: SolidQState) -> int:
    return max((settings.batch_size for settings in state.settings.dispatchers), default=500)


def _perform(app: Flask, state: SolidQState, process_id: int, claimed: ClaimedJob) -> Job | None:
    """Perform ``claimed`` and store its outcome, as a worker's thread and its finisher do;
    return the job (None when it couldn't be loaded: it failed without running)."""
    started = time.monotonic()
    outcome = execute.perform_in_app(app, claimed, None, process_id)
    finalize.finalize_all(
        state.engine,
        process_id,
        [outcome],
        preserve_finished=state.settings.preserve_finished_jobs,
    )
    log_subscriber.log_performed(outcome, time.monotonic() - started)
    return outcome.job
