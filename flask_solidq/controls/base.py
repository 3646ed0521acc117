"""The hook points and the :class:`Control` base every control implements."""

from __future__ import annotations

import enum
import typing as t

if t.TYPE_CHECKING:
    import sqlalchemy as sa

    from flask_solidq.definitions.job import Job
    from flask_solidq.operations.rows import JobRef


class HookPoint(str, enum.Enum):
    """The moments of a job's life where a control may act."""

    #: Before anything is written for an enqueue: compute the keys stored with the job.
    ENQUEUE = "enqueue"
    #: When due jobs become ready (at enqueue, or when the dispatcher finds them due).
    DISPATCH = "dispatch"
    #: Inside the claim transaction, over the claimed batch.
    CLAIM = "claim"
    #: When a worker starts performing a job.
    START = "start"
    #: After a job's outcome (finish, fail, retry, discard) is committed.
    FINISH = "finish"


class Dispatched(t.NamedTuple):
    """What the DISPATCH hooks decided for a batch of due jobs."""

    #: The jobs that may become ready.
    ready: list[JobRef]
    #: The ids of jobs destroyed instead (their rows are gone).
    discarded: set[int]


class Control:
    """A control's hooks; each does nothing unless the control overrides it."""

    def stamp(self, job: Job, row: dict[str, t.Any]) -> None:
        """ENQUEUE: write this control's key for ``job`` into its ``solidq_jobs`` row.

        Runs before anything is written, so an exception (a key callable raising) fails the
        enqueue with nothing stored.
        """

    def acts_on_dispatch(self, row: dict[str, t.Any]) -> bool:
        """Whether :meth:`dispatch` may hold back the job stored as ``row``. When no control
        may, the job becomes ready without running the hooks (the enqueue fast path)."""
        return False

    def dispatch(self, connection: sa.Connection, jobs: list[JobRef]) -> Dispatched:
        """DISPATCH: hold back the due ``jobs`` this control must (blocking or discarding
        them in ``connection``'s transaction); say which may become ready and which were
        discarded (their job rows deleted)."""
        return Dispatched(jobs, set())

    def finish(self, engine: sa.Engine, jobs: list[JobRef]) -> None:
        """FINISH: ``jobs`` left their claim (finished, failed, retried or discarded) and that
        is committed; release what they held. Runs outside any transaction, so a failure
        here can't undo a stored outcome."""
