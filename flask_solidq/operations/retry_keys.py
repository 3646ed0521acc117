"""The keys a job takes when it is retried by hand.

A job keeps the rate-limit and concurrency keys it was stored with. One stored without a key
(enqueued before a later deploy declared ``limits_rate`` or ``limits_concurrency``) would keep
none through every retry: a whole backlog of such jobs would share the bare budget, or run
with no concurrency limit at all. A retry gives it the keys its definition gives it now, as a
``retry_on`` retry does for the rate-limit key (:func:`flask_solidq.operations.execute.
_rate_limit_key`). The job becomes due through the controls' DISPATCH hooks afterwards, so a
new concurrency key takes a slot (or blocks) like any job's.
"""

from __future__ import annotations

import logging
import typing as t

import sqlalchemy as sa

from flask_solidq import controls
from flask_solidq.definitions import registry
from flask_solidq.models.tables import JOBS
from flask_solidq.operations import job_loading
from flask_solidq.operations.claim import CLAIMED_JOB_COLUMNS
from flask_solidq.transitions import jobs as job_rows
from flask_solidq.values import ClaimedJob
from flask_solidq.values import ControlKeys

if t.TYPE_CHECKING:
    import datetime as dt

logger = logging.getLogger("flask_solidq")


_KEYLESS = sa.select(*CLAIMED_JOB_COLUMNS).where(
    sa.or_(JOBS.c.concurrency_key.is_(None), JOBS.c.rate_limit_key.is_(None))
)


def take_current_keys(connection: sa.Connection, ids: list[int], now: dt.datetime) -> None:
    """Give each of ``ids`` stored without a key the key its definition gives it now. In the
    caller's transaction, before the jobs become due. The definition is loaded as a worker
    loads it (by its stored import path, if this process hasn't imported it). A job whose
    definition can't be loaded or whose key callable raises keeps what it has: it fails
    again when it runs, as it would have."""
    updates = []
    for row in connection.execute(_KEYLESS.where(JOBS.c.id.in_(ids))):
        found = _current_keys(ClaimedJob._make(row))
        values = {
            column: found[column]
            for column in ("concurrency_key", "rate_limit_key")
            if getattr(row, column) is None and found[column] is not None
        }
        if values:
            updates.append((row.id, values))
    for job_id, values in updates:
        job_rows.set_keys(connection, job_id, values, now)


def _current_keys(stored: ClaimedJob) -> ControlKeys:
    keys: ControlKeys = {
        "concurrency_key": None,
        "rate_limit_key": None,
        "rate_limit_charges": None,
    }
    if _declares_no_limit(stored.class_name):
        return keys  # the usual failed job: nothing to load
    try:
        controls.stamp(job_loading.load(stored), keys)
    except Exception:  # noqa: BLE001 - a job that can't be loaded or keyed keeps its keys
        logger.debug("SolidQ: job %s keeps its keys on retry", stored.id, exc_info=True)
        return {"concurrency_key": None, "rate_limit_key": None, "rate_limit_charges": None}
    return keys


def _declares_no_limit(class_name: str) -> bool:
    """Whether this process knows ``class_name``'s definition and it declares neither limit,
    so its jobs need not be loaded to learn they have no key (a retry_all of thousands of
    plain failed jobs)."""
    if not registry.is_registered(class_name):
        return False
    definition = registry.lookup(class_name, None)
    return definition._rate_limit is None and definition._concurrency_limit is None
