"""The writers of claimed executions: a claim taken, given back, or deleted with the outcome
it led to."""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq.models.tables import CLAIMED
from flask_solidq.storage import db


def claim(
    connection: sa.Connection, process_id: int, starts: t.Sequence[tuple[int, dt.datetime]]
) -> None:
    """Claim each ``(job_id, start)`` for ``process_id``: its run starts at ``start``."""
    if starts:
        connection.execute(
            _INSERT_CLAIMED,
            [
                {"job_id": job_id, "process_id": process_id, "created_at": start}
                for job_id, start in starts
            ],
        )


def give_back(connection: sa.Connection, process_id: int, job_ids: t.Sequence[int]) -> None:
    """Delete the claims ``process_id`` holds on ``job_ids`` (the caller gives the jobs
    their next execution)."""
    if job_ids:
        connection.execute(_DELETE_HELD, {"ids": list(job_ids), "process_id": process_id})


def delete_held(
    connection: sa.Connection, process_id: int, job_ids: list[int]
) -> dict[int, dt.datetime]:
    """Delete the claims ``process_id`` still holds on ``job_ids``; return when each was
    made (its run's start), by job id: the same statement reads it, at no extra cost."""
    if not job_ids:
        return {}
    params = {"ids": job_ids, "process_id": process_id}
    if db.supports_delete_returning(connection):
        return _starts(connection.execute(_DELETE_HELD_RETURNING, params))
    held = _starts(connection.execute(_LOCK_HELD, params))
    if held:
        connection.execute(_DELETE_HELD, params)
    return held


def take(connection: sa.Connection, condition: sa.ColumnElement[bool]) -> list[int]:
    """Lock and delete the claims matching ``condition``; return their jobs' ids."""
    claims = connection.execute(
        db.for_update(sa.select(CLAIMED.c.id, CLAIMED.c.job_id).where(condition), skip_locked=False)
    ).all()
    if claims:
        connection.execute(CLAIMED.delete().where(CLAIMED.c.id.in_([claim.id for claim in claims])))
    return [claim.job_id for claim in claims]


def _starts(rows: t.Iterable[t.Sequence[t.Any]]) -> dict[int, dt.datetime]:
    """Claims' ``(job_id, created_at)`` rows, by job id (a Result has ``keys()``, so
    ``dict(result)`` would take it for a mapping)."""
    return {row[0]: row[1] for row in rows}


_INSERT_CLAIMED = CLAIMED.insert()
_IDS: sa.BindParameter[t.Any] = sa.bindparam("ids", expanding=True)
_HELD = sa.and_(CLAIMED.c.job_id.in_(_IDS), CLAIMED.c.process_id == sa.bindparam("process_id"))
_DELETE_HELD_RETURNING = (
    CLAIMED.delete().where(_HELD).returning(CLAIMED.c.job_id, CLAIMED.c.created_at)
)
_LOCK_HELD = db.for_update(
    sa.select(CLAIMED.c.job_id, CLAIMED.c.created_at).where(_HELD), skip_locked=False
)
_DELETE_HELD = CLAIMED.delete().where(_HELD)
