"""The :class:`Control` base every control implements: its hooks at the moments of a job's
life, and the small values they exchange with the operations.

The hooks, in the order a job meets them:

* ``takes_enqueue``, ``prepare_enqueue`` and ``enqueue`` (enqueue): store the calls of a job
  this control takes over its own way, instead of the plain insert (coalescing: a call may
  join a pending job instead of storing one); prepared before anything is written, stored
  through the :class:`JobStore` the enqueue operation passes in;
* ``stamp`` (enqueue): compute the keys stored with the job, before anything is written;
* ``dispatch`` (the job becomes due: at enqueue, or when the dispatcher finds it due): take
  what the job needs to become ready, or hold it back (block it, discard it);
* ``claim`` (inside a worker's claim transaction, over the batch it locked): admit each job
  or defer it to a later time, then ``after_claim`` once that transaction committed
  (``claim_failed`` when it raised a database error);
* ``start`` and ``prepare_run`` (a worker is about to perform a claimed job): act on the
  start (coalescing frees the job's key and reads what it runs), then, once the job is loaded,
  give it what it runs with, or say there is nothing to run;
* ``finish`` (the job left its claim: finished, failed, retried, discarded; committed):
  give back what it held.

Each hook does nothing unless the control overrides it, and each has a cheap question in front
of it (``acts_on_dispatch``, ``checked_at_claim``, ``acts_at_start``) so that jobs no control
cares about take the operations' fast paths.
"""

from __future__ import annotations

import datetime as dt
import typing as t

from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    import sqlalchemy as sa

    from flask_solidq.definitions.declared import Declared
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob
    from flask_solidq.values import ControlKeys
    from flask_solidq.values import JobRef
    from flask_solidq.values import JobRow
    from flask_solidq.values import JSONValue


class Dispatched(t.NamedTuple):
    """What the DISPATCH hooks decided for a batch of due jobs."""

    #: The jobs that may become ready.
    ready: list[JobRef]
    #: The ids of jobs to destroy instead (:func:`flask_solidq.operations.dispatch.make_ready`
    #: deletes them, counting them done in their batches).
    discarded: set[int]
    #: The jobs to keep as failed instead, with their error JSON, by id (stored and counted
    #: in their batches by :func:`flask_solidq.operations.dispatch.make_ready`).
    failed: dict[int, str] = {}


class Deferral(t.NamedTuple):
    """A claimed candidate a CLAIM hook sent back to wait instead of running now."""

    job: ClaimedJob
    #: The key that refused it (a rate-limit budget's).
    key: str
    #: When it is looked at again: its scheduled execution's ``scheduled_at``.
    until: dt.datetime


class HeldAtStart(Exception):  # noqa: N818 - a control's answer, not an error
    """Raised by a START hook: the job must not start now and goes back to wait, unstarted
    and with its claim's charges given back (a budget it was admitted by is paused: see
    :func:`flask_solidq.controls.rate_limit.control.RateLimitControl.start`)."""

    def __init__(
        self, pause: dt.timedelta | None = None, *, wait: dt.timedelta | None = None
    ) -> None:
        super().__init__("held at start: a rate-limit budget of the job is paused")
        #: The pause this process knows of and the database may not yet (it is stored with
        #: the job); None when the pause it met is the database's.
        self.pause = pause
        #: How long the job waits at least, when no pause says (the budgets table is gone).
        self.wait = wait if wait is not None else pause


class ClaimAgain(Exception):  # noqa: N818 - a request to the claim, not a failure
    """A CLAIM hook failed for a reason it has now remembered (a table gone under a running
    worker: :meth:`Control.claim_failed`): the claim's transaction rolls back, and the claim
    runs again from the start. The database error is on ``__cause__``."""


class ClaimClock:
    """The time a claim charges budgets with and stamps its claims with: read once, at the
    first call, from ``read`` (the claim passes the database's clock: see
    :mod:`flask_solidq.storage.database_clock`).

    The CLAIM hooks call it only after locking what they check, so a claim that waited for
    another's lock reads the clock after that one committed: no claim reads a time older than
    the last one that charged the budget read. And since every claim reads the one clock of
    the database, a worker whose host clock runs ahead or behind charges the budget as the
    others do.

    A claim made for a worker that waits for a job's start (``charges_ahead``) lets a hook
    charge a job at a moment just ahead of the clock (:meth:`charge_ahead`); the job's claim is
    then stamped with that moment, and the worker starts it no earlier (see "Charging ahead"
    in :mod:`~flask_solidq.controls.rate_limit.gcra`).
    """

    def __init__(
        self, read: t.Callable[[], dt.datetime] = utcnow, *, charges_ahead: bool = False
    ) -> None:
        self._read = read
        self._now: dt.datetime | None = None
        self.charges_ahead = charges_ahead
        #: The jobs charged ahead of the clock, by id: the moment each was charged at.
        self.ahead: dict[int, dt.datetime] = {}

    def __call__(self) -> dt.datetime:
        if self._now is None:
            self._now = self._read()
        return self._now

    def read_or_host_time(self) -> dt.datetime:
        """The time read, if a hook read it; otherwise this host's clock, without a round
        trip (for stamps that decide nothing, such as a claim's ``created_at``)."""
        return self._now if self._now is not None else utcnow()

    def charge_ahead(self, job_id: int, at: dt.datetime) -> None:
        """Record that a hook charged job ``job_id`` at ``at``, ahead of the clock."""
        if at > self():
            self.ahead[job_id] = at

    def charged_at(self, job_id: int) -> dt.datetime:
        """The moment job ``job_id``'s claim is stamped with: the one it was charged at
        ahead of the clock, or the time read."""
        return self.ahead.get(job_id) or self.read_or_host_time()


class JobStore(t.Protocol):
    """What a control that stores jobs its own way needs of the enqueue operation: the
    ``solidq_jobs`` row of a job, its insert, and its way to ready. The operations sit above
    the controls, so the enqueue passes its store in (:data:`flask_solidq.operations.enqueue
    .STORE`) rather than the control importing it."""

    def new_row(self, job: Job, now: dt.datetime, payload: dict[str, JSONValue]) -> JobRow:
        """The row of ``job`` stored with ``payload``, the other controls' keys stamped."""
        ...

    def insert(self, connection: sa.Connection, row: JobRow) -> int:
        """Insert the job ``row``; return its id."""
        ...

    def place(self, connection: sa.Connection, job_id: int, row: JobRow, now: dt.datetime) -> bool:
        """Give the job stored as ``row`` its first execution (the DISPATCH hooks run);
        False when a control destroyed it instead."""
        ...

    def make_ready(self, connection: sa.Connection, job: JobRef, now: dt.datetime) -> None:
        """Move a due job to ready (or blocked: the DISPATCH hooks run)."""
        ...


class Control:
    """A control's hooks; each does nothing unless the control overrides it."""

    def concerns_enqueue(self, declared: Declared) -> bool:
        """ENQUEUE: whether :meth:`takes_enqueue`, :meth:`reads_database_clock`,
        :meth:`stamp` or :meth:`acts_on_dispatch` may act on a job of a definition that
        declared ``declared``; when no control's may, a single enqueue asks none of them (see
        :func:`flask_solidq.controls.concern_enqueue`). Yes unless the control says no."""
        return True

    def takes_enqueue(self, job: Job) -> bool:
        """ENQUEUE: whether this control stores ``job`` its own way (:meth:`enqueue`) instead
        of the plain insert."""
        return False

    def reads_database_clock(self, job: Job) -> bool:
        """Whether enqueuing ``job`` must stamp it with the database's clock rather than this
        host's (a time the dispatcher compares with its own reading of that clock)."""
        return False

    def prepare_enqueue(self, jobs: t.Sequence[Job], now: dt.datetime, *, bulk: bool) -> t.Any:
        """ENQUEUE: work out everything the jobs it took need (keys, payloads) before anything
        is written, so that an error (a key callable raising) leaves nothing stored; return
        it for :meth:`enqueue`."""
        raise NotImplementedError

    def enqueue(
        self, engine: sa.Engine, prepared: t.Any, now: dt.datetime, store: JobStore, *, bulk: bool
    ) -> t.Callable[[], None]:
        """ENQUEUE: store what :meth:`prepare_enqueue` prepared, recording each outcome on its
        job; return what to announce once the caller is past its own handling of database
        errors (a signal receiver's error is the receiver's, never a failed enqueue).

        :raises sqlalchemy.exc.SQLAlchemyError: the database failed.
        """
        raise NotImplementedError

    def acts_at_start(self, claimed: ClaimedJob) -> bool:
        """Whether :meth:`start` acts on ``claimed``: a question cheap enough to ask of every
        job a worker runs (a string prefix, say), so that the others start as fast as if no
        control were there."""
        return False

    def start(self, engine: sa.Engine, claimed: ClaimedJob) -> tuple[ClaimedJob, t.Any]:
        """START: a worker is about to perform ``claimed``, on which :meth:`acts_at_start`
        said this control acts; return the job as it now reads (its payload read again) and
        what :meth:`prepare_run` needs."""
        raise NotImplementedError

    def prepare_run(self, job: Job, started: t.Any) -> bool:
        """START, once the job is loaded: give ``job`` what it runs with from ``started``
        (what :meth:`start` returned); False when there is nothing to run (the job then
        finishes without running).

        :raises Exception: the job can't run (its stored work doesn't load, or no longer
            matches its definition): it fails, before anything ran.
        """
        return True

    def stamp(self, job: Job, row: ControlKeys) -> None:
        """ENQUEUE: write this control's key for ``job`` into its ``solidq_jobs`` row.

        Runs before anything is written, so an exception (a key callable raising) fails the
        enqueue with nothing stored.
        """

    def acts_on_dispatch(self, row: JobRow) -> bool:
        """Whether :meth:`dispatch` may hold back the job stored as ``row``. When no control
        may, the job becomes ready without running the hooks (the enqueue fast path)."""
        return False

    def dispatch(self, connection: sa.Connection, jobs: list[JobRef]) -> Dispatched:
        """DISPATCH: hold back the due ``jobs`` this control must (blocking or discarding
        them in ``connection``'s transaction); say which may become ready and which were
        discarded (their job rows deleted)."""
        return Dispatched(jobs, set())

    def checked_at_claim(self) -> frozenset[str]:
        """The names of the registered definitions whose jobs :meth:`claim` may defer. A
        claim whose batch holds none of them runs no hook (one statement on PostgreSQL)."""
        return frozenset()

    def claim(
        self, connection: sa.Connection, jobs: list[ClaimedJob], clock: ClaimClock
    ) -> list[Deferral]:
        """CLAIM: inside the claim transaction, over the candidates still admitted (in queue
        order), say which must wait and until when; read ``clock`` only once what the
        decision depends on is locked. The claim moves the deferred jobs to scheduled
        executions in the same transaction."""
        return []

    def claim_failed(self, connection: sa.Connection, error: BaseException) -> bool:
        """CLAIM: :meth:`claim` raised the database error ``error``; whether this control
        knows why, and has remembered it, so that the same claim run again in a fresh
        transaction won't fail the same way (the claim is then rolled back and run once
        more: :class:`ClaimAgain`). ``connection``'s transaction may be aborted."""
        return False

    def after_claim(self, engine: sa.Engine, deferrals: list[Deferral]) -> None:
        """After the claim that deferred ``deferrals`` (by any control) committed: release
        what the deferred jobs held, announce them."""

    def finish(self, engine: sa.Engine, jobs: list[JobRef]) -> None:
        """FINISH: ``jobs`` left their claim (finished, failed, retried or discarded) and that
        is committed; release what they held. Runs outside any transaction, so a failure
        here can't undo a stored outcome."""

    def maintain(self, engine: sa.Engine, batch_size: int) -> None:
        """MAINTAIN: the dispatcher's periodic failsafe (every
        ``concurrency_maintenance_interval``): free what holders that died left behind, at
        most ``batch_size`` rows a statement."""
