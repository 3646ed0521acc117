"""What becomes of the claims of a supervisor's runners that are gone: those that didn't
deregister while it stopped, and one that died on its own. Each logs the jobs it put back."""

from __future__ import annotations

import logging
import typing as t

import sqlalchemy as sa

from flask_solidq.config import OnWorkerDeath
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.operations import processes as process_roll
from flask_solidq.operations import release

logger = logging.getLogger("flask_solidq")


def release_supervisees(engine: sa.Engine, supervisor_id: int, who: str, reason: str) -> None:
    """Release the claims of ``supervisor_id``'s processes that didn't deregister (quit or
    killed while stopping) and delete their rows: their jobs run again, and the log names
    them, saying ``reason``."""
    try:
        rows = process_roll.supervisees(engine, supervisor_id)
        claimed = release.claimed_jobs(engine, [row.id for row in rows]) if rows else []
        for row in rows:
            process_roll.remove(engine, row, policy=OnWorkerDeath.RELEASE, error="")
    except sa.exc.SQLAlchemyError:
        logger.warning("SolidQ couldn't release the claims of stopped processes", exc_info=True)
        return
    if claimed:
        log_subscriber.log_released(logger, who, reason, claimed, len(claimed))


def handle_dead_runner(
    engine: sa.Engine,
    supervisor_id: int,
    is_runner: t.Callable[[process_roll.ProcessRow], bool],
    *,
    who: str,
    label: str,
    description: str,
    never_started: t.Collection[int],
    policy: OnWorkerDeath,
) -> None:
    """The claims of the dead runner's row (if it is still registered) on ``never_started``
    jobs (its start ledger's) go back to ready, the others follow ``policy``, and the row
    goes."""
    try:
        for row in process_roll.supervisees(engine, supervisor_id):
            if is_runner(row):
                _release_never_started(engine, row, who, label, never_started)
                error = process_roll.exit_error(row, description)
                process_roll.remove(engine, row, policy=policy, error=error)
    except sa.exc.SQLAlchemyError:
        logger.warning("SolidQ couldn't handle the claims of a dead runner", exc_info=True)


def _release_never_started(
    engine: sa.Engine,
    row: process_roll.ProcessRow,
    who: str,
    label: str,
    job_ids: t.Collection[int],
) -> None:
    """Put back to ready the dead runner's claims on ``job_ids`` (claimed ahead, never
    started): committed before the policy applies to the rest, so a crash in between leaves
    them ready, never failed."""
    released = release.release_never_started(
        engine, row.id, job_ids, reason=release.ReleaseReason.PROCESS_GONE
    )
    if released:
        log_subscriber.log_released(
            logger, who, f"{label} died before starting them", released, len(released)
        )
