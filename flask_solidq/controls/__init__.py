"""The controls: concurrency limits, rate limits and coalescing.

Each control is a declaration (a decorator with validated options, stored on the job class)
plus hooks at the moments of a job's life (:class:`~flask_solidq.controls.base.Control`). The
operations call every control at each moment through the functions below and never name one:
a new control is a new module with a :class:`~flask_solidq.controls.base.Control` added to
:data:`CONTROLS`.
"""

from __future__ import annotations

import functools
import typing as t

import sqlalchemy as sa

from flask_solidq import slots
from flask_solidq.controls import coalesce
from flask_solidq.controls import concurrency
from flask_solidq.controls import rate_limit
from flask_solidq.controls.base import ClaimAgain as ClaimAgain
from flask_solidq.controls.base import ClaimClock
from flask_solidq.controls.base import Control
from flask_solidq.controls.base import Deferral
from flask_solidq.controls.base import Dispatched
from flask_solidq.controls.base import HeldAtStart as HeldAtStart
from flask_solidq.controls.base import JobStore

if t.TYPE_CHECKING:
    import datetime as dt

    from flask_solidq.definitions.declared import Declared
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob
    from flask_solidq.values import ControlKeys
    from flask_solidq.values import JobRef
    from flask_solidq.values import JobRow

#: Every control, in the order their hooks run. Fixed at import: the hooks a control
#: overrides are looked up once (:func:`_overriding`).
CONTROLS: tuple[Control, ...] = (concurrency.CONTROL, rate_limit.CONTROL, coalesce.CONTROL)


class Enqueue(t.NamedTuple):
    """Jobs about to be enqueued, split by who stores them."""

    #: The jobs the enqueue inserts itself.
    plain: list[Job]
    #: Each control that takes jobs over, with what it prepared for them.
    taken: list[tuple[Control, t.Any]]


@functools.cache
def _overriding(hook: str) -> tuple[Control, ...]:
    """The controls that override the hook named ``hook``: an enqueue or a start asks only
    them, so the others' no-op defaults cost plain jobs nothing (a start runs per job)."""
    default = getattr(Control, hook)
    return tuple(control for control in CONTROLS if getattr(type(control), hook) is not default)


def concern_enqueue(definition: type[Job]) -> bool:
    """Whether some control's enqueue hooks may act on jobs of ``definition``
    (:meth:`~flask_solidq.controls.base.Control.concerns_enqueue`); when none may, a single
    enqueue asks none of them, which costs a plain job a few microseconds less.

    Answered once per declarations object: a control decorator gives the class a new one
    (:mod:`flask_solidq.definitions.declared`), so a changed declaration is asked about anew.
    """
    declared = definition._declared
    known = _concerned.get(id(declared))
    if known is not None and known[0] is declared:
        return known[1]
    answer = any(control.concerns_enqueue(declared) for control in CONTROLS)
    # The object is kept with its answer: its id can't be reused while it is.
    _concerned[id(declared)] = (declared, answer)
    return answer


#: :func:`concern_enqueue`'s answers, by the id of the declarations object asked about.
_concerned: dict[int, tuple[Declared, bool]] = {}


def reads_database_clock(jobs: t.Iterable[Job]) -> bool:
    """Whether any of ``jobs`` must be stamped with the database's clock."""
    controls = _overriding("reads_database_clock")
    for job in jobs:  # loops, not any(): every single enqueue asks
        for control in controls:
            if control.reads_database_clock(job):
                return True
    return False


def prepare_enqueue(jobs: t.Sequence[Job], now: dt.datetime, *, bulk: bool) -> Enqueue:
    """Split ``jobs`` between the plain insert and the controls that take them over (the
    first control that takes a job has it), each control's share prepared: every key and
    payload is worked out before anything is written."""
    plain = list(jobs)
    taken: list[tuple[Control, t.Any]] = []
    for control in _overriding("takes_enqueue"):
        mine: list[Job] = []
        rest: list[Job] = []
        for job in plain:
            (mine if control.takes_enqueue(job) else rest).append(job)
        if mine:
            plain = rest
            taken.append((control, control.prepare_enqueue(mine, now, bulk=bulk)))
    return Enqueue(plain, taken)


def enqueue(
    engine: sa.Engine, split: Enqueue, now: dt.datetime, store: JobStore, *, bulk: bool
) -> t.Callable[[], None]:
    """Have each control store the jobs it took over (``split.taken``); return what to
    announce once the caller is past its handling of database errors."""
    announcements = [
        control.enqueue(engine, prepared, now, store, bulk=bulk)
        for control, prepared in split.taken
    ]

    def announce() -> None:
        for announcement in announcements:
            announcement()

    return announce


def acts_at_start(claimed: ClaimedJob) -> bool:
    """Whether any control's START hook acts on ``claimed`` (most jobs: none)."""
    for control in _overriding("acts_at_start"):  # a loop, not any(): it runs for every job
        if control.acts_at_start(claimed):
            return True
    return False


def start(engine: sa.Engine, claimed: ClaimedJob) -> tuple[ClaimedJob, list[tuple[Control, t.Any]]]:
    """Run the START hook of every control that acts on ``claimed``, before it is performed;
    return the job as it now reads and what each of them needs once it is loaded."""
    started: list[tuple[Control, t.Any]] = []
    for control in _overriding("acts_at_start"):
        if control.acts_at_start(claimed):
            claimed, needs = control.start(engine, claimed)
            started.append((control, needs))
    return claimed, started


def prepare_run(job: Job, started: list[tuple[Control, t.Any]]) -> bool:
    """Give the loaded ``job`` what the controls that acted at its start read for it; False
    when one says there is nothing to run."""
    return all(control.prepare_run(job, needs) for control, needs in started)


def stamp(job: Job, row: ControlKeys) -> None:
    """Run every control's ENQUEUE hook over one job's row (those that have one: it runs for
    every job of a bulk enqueue)."""
    for control in _overriding("stamp"):
        control.stamp(job, row)


def act_on_dispatch(row: JobRow) -> bool:
    """Whether any control's DISPATCH hook may hold back the job stored as ``row``."""
    for control in _overriding("acts_on_dispatch"):  # a loop, not any(): it runs for every job
        if control.acts_on_dispatch(row):
            return True
    return False


def dispatch(connection: sa.Connection, jobs: list[JobRef]) -> Dispatched:
    """Run every control's DISPATCH hook; say which jobs may become ready and which were
    discarded."""
    discarded: set[int] = set()
    failed: dict[int, str] = {}
    for control in CONTROLS:
        if not jobs:
            break
        jobs, dropped, failing = control.dispatch(connection, jobs)
        discarded |= dropped
        failed |= failing
    return Dispatched(jobs, discarded, failed)


def checked_at_claim() -> frozenset[str]:
    """The names of the job definitions (registered in this process) whose jobs some
    control's CLAIM hook may defer; empty when claims need run no hook."""
    names: frozenset[str] = frozenset()
    for control in CONTROLS:
        names |= control.checked_at_claim()
    return names


def claim(connection: sa.Connection, jobs: list[ClaimedJob], clock: ClaimClock) -> list[Deferral]:
    """Run every control's CLAIM hook over the candidates, in queue order; return the jobs
    that must wait instead of running now.

    :raises ClaimAgain: a hook failed on the database for a reason it has remembered: roll
        the claim back and run it again.
    """
    deferrals: list[Deferral] = []
    for control in CONTROLS:
        deferred = {deferral.job.id for deferral in deferrals}
        candidates = [job for job in jobs if job.id not in deferred]
        if not candidates:
            break
        try:
            deferrals.extend(control.claim(connection, candidates, clock))
        except sa.exc.DBAPIError as error:
            if control.claim_failed(connection, error):
                raise ClaimAgain from error
            raise
    return deferrals


#: Told of the jobs each committed claim deferred: :mod:`flask_solidq.tracing` fills it to
#: record each deferral in a span of its job's trace.
DEFERRED: slots.Hook[t.Callable[[list[Deferral]], None]] = slots.Hook("flask_solidq.tracing.spans")


def after_claim(engine: sa.Engine, deferrals: list[Deferral]) -> None:
    """Run every control's hook for jobs a committed claim deferred."""
    if deferrals:
        for control in CONTROLS:
            control.after_claim(engine, deferrals)
        told = DEFERRED.function
        if told is not None:
            told(deferrals)


def finish(engine: sa.Engine, jobs: list[JobRef]) -> None:
    """Run every control's FINISH hook, after the outcomes of ``jobs`` were committed."""
    if jobs:
        for control in CONTROLS:
            control.finish(engine, jobs)


def maintain(engine: sa.Engine, batch_size: int) -> None:
    """Run every control's MAINTAIN hook (the dispatcher's failsafe)."""
    for control in CONTROLS:
        control.maintain(engine, batch_size)
