"""Saving a running job's step progress between interruptions (``SOLIDQ_STEP_SAVE_INTERVAL``).

An interrupted, retried or failed job's progress is written with its outcome; a worker killed
outright (SIGKILL, OOM, a lost machine) writes nothing, and its job would resume from its last
interruption. So while a job runs in a worker, its payload is also written when a step
finishes, and at an ``advance`` once the interval passed since the last write (0: at every
``advance``; None: never, only with the outcome).

The write is guarded by ownership: it changes the job's row only while this process still
holds the job's claim. A run whose claim was released (past the shutdown timeout) or failed
(its process pruned) may still be running; without the guard it could overwrite the progress
of the run that took the job over.
"""

from __future__ import annotations

import functools
import logging
import typing as t

import sqlalchemy as sa

from flask_solidq.definitions import arguments
from flask_solidq.state import get_state
from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from flask_solidq.transitions import jobs as job_rows

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob

logger = logging.getLogger("flask_solidq")


def saver(claimed: ClaimedJob, job: Job, process_id: int | None) -> t.Callable[[], object] | None:
    """What writes ``job``'s payload while ``process_id`` holds its claim; None outside a
    worker (no process) or with ``SOLIDQ_STEP_SAVE_INTERVAL = None``. Requires an app
    context."""
    state = get_state()
    if process_id is None or state.settings.step_save_interval is None:
        return None
    return functools.partial(save, state.engine, claimed.id, process_id, job)


def count_resumption(claimed: ClaimedJob, job: Job, process_id: int | None) -> None:
    """Write the resumption a worker's run just counted, before the job runs: a run killed
    outright (SIGKILL, OOM) then still counts towards ``max_resumptions``, whatever
    ``SOLIDQ_STEP_SAVE_INTERVAL`` says. Requires an app context."""
    if process_id is not None:
        save(get_state().engine, claimed.id, process_id, job)


def save(engine: sa.Engine, job_id: int, process_id: int, job: Job) -> bool:
    """Write ``job``'s payload to its row if ``process_id`` still holds its claim; return
    whether it did. A database error is logged, not raised: the job goes on, and its progress
    is written with its outcome."""
    try:
        payload = arguments.dumps(job.payload())
        with db.write(engine) as connection:
            return job_rows.save_held_arguments(connection, job_id, process_id, payload, utcnow())
    except Exception:  # noqa: BLE001 - a save is best effort; the outcome writes it again
        logger.warning(
            "SolidQ couldn't save the step progress of job %s; it goes on", job_id, exc_info=True
        )
        return False
