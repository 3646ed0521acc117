"""``solidq.batch()``: the block whose enqueues make one batch (Solid Queue's batches).

The block is one transaction on the queue's database (joining the app session's, as a single
enqueue does): the batch's row is inserted first, every job enqueued inside carries its id,
and as the block ends the jobs it stored are counted onto the row. A block that raises rolls
back the batch and its jobs; a batch is seen by workers only once its block commits.
Under the test adapter the batch is kept in memory instead (:mod:`flask_solidq.testing.batches`).
"""

from __future__ import annotations

import contextlib
import typing as t

from flask_solidq import batches
from flask_solidq import current
from flask_solidq.config import Adapter
from flask_solidq.definitions import batches as definitions_batches
from flask_solidq.definitions.batches import Batch
from flask_solidq.definitions.running import running_job
from flask_solidq.state import SolidQState
from flask_solidq.state import get_state
from flask_solidq.storage import app_transaction
from flask_solidq.storage import db
from flask_solidq.testing import batches as testing_batches
from flask_solidq.timing import utcnow

#: What ``parent=`` takes: a batch (as read, or as its block yielded it) or a batch id.
Parent: t.TypeAlias = Batch | current.OpenBatch | int | None


@contextlib.contextmanager
def batch(
    on_success: batches.Callback = None,
    on_failure: batches.Callback = None,
    on_finish: batches.Callback = None,
    parent: Parent = None,
    **metadata: object,
) -> t.Iterator[current.OpenBatch]:
    """Open a batch; see :meth:`flask_solidq.SolidQ.batch`."""
    state = _state_for("solidq.batch()")
    parent_id = _parent_id(parent)
    callbacks = batches.prepare_callbacks(
        {"on_success": on_success, "on_failure": on_failure, "on_finish": on_finish}
    )
    if state.adapter is Adapter.TEST:
        with testing_batches.batch(state, callbacks, metadata, parent_id) as held:
            yield held
        return
    with app_transaction.joining(state), db.transaction(state.engine) as connection:
        batch_id = batches.open_batch(connection, callbacks, metadata, utcnow(), parent_id)
        opened = current.OpenBatch(batch_id)
        with current.enqueuing_into(opened):
            yield opened
        batches.close_batch(state.engine, connection, opened, utcnow(), parent_id)


def _parent_id(parent: Parent) -> int | None:
    """The id of the batch a new batch is a child of: ``parent``'s, or else the batch of the
    job running in this context (None outside one, or for a job in no batch).

    :raises TypeError: ``parent`` is neither a batch nor a batch id.
    """
    if parent is None:
        running = running_job()
        return running.batch_id if running is not None else None
    if isinstance(parent, (Batch, current.OpenBatch)):
        return parent.id
    if isinstance(parent, int) and not isinstance(parent, bool):
        return parent
    raise TypeError(f"solidq.batch(parent=...) takes a batch or a batch id, not {parent!r}.")


@contextlib.contextmanager
def adding_to(batch_id: int) -> t.Iterator[current.OpenBatch]:
    """A block whose enqueues add to batch ``batch_id`` (``with current_job.batch.enqueue():``
    or ``solidq.batches.find(id).enqueue()``): one transaction, as :func:`batch`'s block is.
    As it ends, the jobs it stored are counted onto the batch if the batch is still open;
    if it has finished, :class:`~flask_solidq.BatchAlreadyFinished` rolls the block back.

    The batch's row is locked only then, not while the block runs: a slow block doesn't hold
    up the finishers of the batch's jobs, and the last finisher and the block are ordered by
    that one lock, whichever comes first.

    :raises flask_solidq.BatchAlreadyFinished: the batch finished (or is gone) first.
    """
    state = _state_for("Adding to a batch")
    if state.adapter is Adapter.TEST:
        with testing_batches.adding_to(state, batch_id) as held:
            yield held
        return
    with app_transaction.joining(state), db.transaction(state.engine) as connection:
        opened = current.OpenBatch(batch_id)
        with current.enqueuing_into(opened):
            yield opened
        batches.add_to_batch(state.engine, connection, opened, utcnow())


def _state_for(what: str) -> SolidQState:
    """The current app's state, checked for a block of enqueues into a batch.

    :raises RuntimeError: the app uses the inline adapter, or a batch block is open.
    """
    state = get_state()
    if state.adapter is Adapter.INLINE:
        raise RuntimeError(
            f"{what} needs a queue to hold its jobs until they run; SOLIDQ_ADAPTER is"
            " 'inline', which performs each job as it is enqueued. Use the 'solidq' adapter"
            " (the default), or 'test' in tests (perform_enqueued_jobs() runs the batch)."
        )
    outer = current.open_batch()
    if outer is not None:
        raise RuntimeError(
            f"{what} inside the block of batch {outer.id}: batch blocks don't nest. Enqueue"
            " into the open block, or open the next one after it."
        )
    if state.adapter is Adapter.SOLIDQ:
        state.check_tables()
    return state


class Batches:
    """``solidq.batches``: read the current app's batches."""

    def find(self, batch_id: int) -> Batch | None:
        """A fresh read of batch ``batch_id``: its counters, times, metadata and status; None
        when there is no such batch (or its block hasn't committed). Under the test adapter,
        the batch in memory."""
        state = get_state()
        if state.adapter is Adapter.TEST:
            return definitions_batches.find(batch_id)  # the test adapter's, in memory
        state.check_tables()
        return definitions_batches.find(batch_id, state.engine)


#: A batch's enqueue() block is this module's.
definitions_batches.ADDING_TO.fill(adding_to)
