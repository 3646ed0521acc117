"""Budgets: the rate limit's rows in ``solidq_rate_limits``, one per key.

A claim locks the budgets of its limited jobs, in sorted key order, for the length of its
transaction, so two claimers never admit against the same budget at once and never deadlock
each other; a budget seen for the first time is inserted. The arithmetic on a budget's times
lives in :mod:`flask_solidq.controls.rate_limit.gcra`; this module only reads and writes rows.
"""

from __future__ import annotations

import datetime as dt
import time
import typing as t

import sqlalchemy as sa

from flask_solidq.controls.rate_limit.gcra import Budget
from flask_solidq.models.tables import BUDGETS
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.timing import as_utc

_KEYS: sa.BindParameter[t.Any] = sa.bindparam("keys", expanding=True)
_LOCK = db.for_update(
    sa.select(
        BUDGETS.c.key,
        BUDGETS.c.tat,
        BUDGETS.c.last_slot_at,
        BUDGETS.c.admissions,
        BUDGETS.c.backed_off_until,
    )
    .where(BUDGETS.c.key.in_(_KEYS))
    .order_by(BUDGETS.c.key),
    skip_locked=False,
)
_SAVE = (
    BUDGETS.update()
    .where(BUDGETS.c.key == sa.bindparam("budget_key"))
    .values(
        tat=sa.bindparam("new_tat"),
        last_slot_at=sa.bindparam("new_last_slot_at"),
        admissions=sa.bindparam("new_admissions"),
        backed_off_until=sa.bindparam("new_backed_off_until"),
        updated_at=sa.bindparam("now"),
    )
)


class Locked:
    """The budgets a claim locked: the state of each row, and which row each key it asked
    for is stored in. On MySQL, whose default collation ignores case and trailing spaces, two
    keys can share one row (and so one budget), as docs/rate-limits.md says."""

    def __init__(self) -> None:
        #: Stored key -> the budget in that row.
        self.rows: dict[str, Budget] = {}
        self._stored: dict[str, str] = {}

    def __getitem__(self, key: str) -> Budget:
        return self.rows[self._stored.get(key, key)]

    def add(self, row: sa.Row[t.Any], asked: str | None = None) -> None:
        self.rows.setdefault(
            row.key,
            Budget(
                row.tat, row.last_slot_at, row.admissions, backed_off_until=row.backed_off_until
            ),
        )
        if asked is not None and asked != row.key:
            self._stored[asked] = row.key


#: How far before the inserting host's time a new budget's ``tat`` is set: any ``tat`` before
#: the claim's time admits as a missing budget would, and hosts' clocks are never a day apart.
NEW_BUDGET_AGE = dt.timedelta(days=1)


def lock(connection: sa.Connection, keys: t.Iterable[str], now: dt.datetime) -> Locked:
    """Lock the budgets of ``keys`` until the caller's transaction ends, inserting the missing
    ones (as idle budgets); return their states.

    Existing rows are locked first, in key order, in one statement; rows seen for the first
    time are inserted and locked after them. Two claims that both insert new keys can still
    deadlock on MySQL; the claim is retried then
    (:func:`flask_solidq.storage.db.retrying_deadlocks`).
    """
    wanted = sorted(set(keys))
    locked = Locked()
    for row in connection.execute(_LOCK, {"keys": wanted}):
        locked.add(row)
    missing = [key for key in wanted if key not in locked.rows]
    if missing:
        # ``now`` is this host's time (the claim reads the database's clock only after the
        # locks): a new budget's ``tat`` lies well before it, so the budget is idle whatever
        # this host's clock says (one ahead of the database's would hold the first claims back).
        idle = now - NEW_BUDGET_AGE
        rows = [
            {"key": key, "tat": idle, "last_slot_at": None, "created_at": now, "updated_at": now}
            for key in missing
        ]
        db.insert_ignoring_duplicates(connection, BUDGETS, rows)
        for key in missing:
            # One by one: the database says which row it takes each key to be.
            locked.add(connection.execute(_LOCK, {"keys": [key]}).one(), asked=key)
    return locked


def save(connection: sa.Connection, locked: Locked, now: dt.datetime) -> None:
    """Write the budgets' new times, in the caller's transaction (which locked them)."""
    if locked.rows:
        connection.execute(
            _SAVE,
            [
                {
                    "budget_key": key,
                    "new_tat": budget.tat or now,
                    "new_last_slot_at": budget.last_slot_at,
                    # The admissions' ring rides on the same UPDATE (no statement of its own).
                    "new_admissions": budget.ring(),
                    "new_backed_off_until": budget.backed_off_until,
                    "now": now,
                }
                for key, budget in sorted(locked.rows.items())
            ],
        )


def read(connection: sa.Connection, key: str) -> Budget | None:
    """The budget of ``key`` without locking it; None when it has no row."""
    row = connection.execute(
        sa.select(BUDGETS.c.tat, BUDGETS.c.last_slot_at, BUDGETS.c.backed_off_until).where(
            BUDGETS.c.key == key
        )
    ).first()
    if row is None:
        return None
    return Budget(row.tat, row.last_slot_at, backed_off_until=row.backed_off_until)


def paused_until(connection: sa.Connection, keys: t.Sequence[str]) -> dt.datetime | None:
    """Until when a back-off holds any of the budgets of ``keys`` now, by the database's
    clock (the latest end); None when none is paused. One statement, no lock: a job about to
    start asks it (:meth:`flask_solidq.controls.rate_limit.control.RateLimitControl.start`)."""
    clock = database_clock.column(connection)
    columns = [BUDGETS.c.backed_off_until] if clock is None else [BUDGETS.c.backed_off_until, clock]
    query = sa.select(*columns).where(
        BUDGETS.c.key.in_(keys), BUDGETS.c.backed_off_until.is_not(None)
    )
    rows = connection.execute(query).all()
    if not rows:
        return None
    now = database_clock.now(connection) if clock is None else as_utc(rows[0][1])
    ends = [end for end in (as_utc(row[0]) for row in rows) if end > now]
    return max(ends) if ends else None


def clear_idle_in_batches(
    engine: sa.Engine, *, batch_size: int = 500, sleep_between_batches: float = 0.0
) -> int:
    """Delete the budgets that admit exactly as a missing row would (full, no slot handed out
    ahead, no back-off holding it), ``batch_size`` at a time; return how many.

    Clearing never changes what is admitted: the delete re-checks each row's times under its
    lock, so a budget a claim charges meanwhile stays, and a claim after the delete inserts
    the row again.
    """
    cleared = 0
    while True:
        with db.write(engine) as connection:
            # The database's clock, which the claims charged the budgets with: by a host's
            # clock running ahead, a budget still owing would look idle.
            now = database_clock.now(connection)
            idle = sa.and_(
                BUDGETS.c.tat <= now,
                sa.or_(BUDGETS.c.last_slot_at.is_(None), BUDGETS.c.last_slot_at <= now),
                # A paused budget isn't idle: a missing row would admit at once.
                sa.or_(BUDGETS.c.backed_off_until.is_(None), BUDGETS.c.backed_off_until <= now),
            )
            ids = list(
                connection.scalars(
                    sa.select(BUDGETS.c.id).where(idle).order_by(BUDGETS.c.id).limit(batch_size)
                )
            )
            if ids:
                result = connection.execute(BUDGETS.delete().where(BUDGETS.c.id.in_(ids), idle))
                cleared += result.rowcount
        if len(ids) < batch_size:
            return cleared
        if sleep_between_batches:
            time.sleep(sleep_between_batches)


class Waiting(t.NamedTuple):
    """The jobs a budget deferred that wait now: how many, and when the first is looked at
    again."""

    key: str
    size: int
    next_check_at: dt.datetime


#: A deferred job, in a query joining scheduled executions to their jobs: a scheduled execution
#: due later than its job's own ``scheduled_at`` (the claim moved the execution, never the
#: job), of a rate-limited job. A job scheduled with ``wait=`` has both times the same, and a
#: debounce moves both, so neither reads as deferred.
IS_DEFERRED = sa.and_(
    JOBS.c.scheduled_at.is_not(None),
    SCHEDULED.c.scheduled_at > JOBS.c.scheduled_at,
    JOBS.c.rate_limit_key.is_not(None),
    JOBS.c.rate_limit_key != "",
)


#: Per scheduled execution: its job's rate-limit key when the execution is deferred (as
#: :data:`IS_DEFERRED` says), else NULL. A correlated lookup along the jobs' primary key, so a
#: count over the scheduled executions costs one index probe per execution whatever the size
#: of the jobs table (a join lets the planner scan a million finished jobs instead).
DEFERRED_KEY = (
    sa.select(JOBS.c.rate_limit_key)
    .where(
        JOBS.c.id == SCHEDULED.c.job_id,
        JOBS.c.scheduled_at < SCHEDULED.c.scheduled_at,
        JOBS.c.rate_limit_key != "",
    )
    .scalar_subquery()
)


def waiting(
    connection: sa.Connection, key: str | None = None, *, keys: t.Sequence[str] | None = None
) -> list[Waiting]:
    """The deferred jobs waiting, per budget key (of ``key`` alone, or of ``keys``, when
    given), by key. Reads every scheduled execution once (see :data:`DEFERRED_KEY`)."""
    executions = sa.select(
        DEFERRED_KEY.label("rate_limit_key"), SCHEDULED.c.scheduled_at
    ).subquery()
    deferred_key = executions.c.rate_limit_key
    wanted = [key] if key is not None else keys
    query = (
        sa.select(deferred_key, sa.func.count(), sa.func.min(executions.c.scheduled_at))
        .where(deferred_key.is_not(None) if wanted is None else deferred_key.in_(wanted))
        .group_by(deferred_key)
        .order_by(deferred_key)
    )
    return [Waiting(*row) for row in connection.execute(query)]


def waiting_per_queue(connection: sa.Connection) -> list[tuple[str, Waiting]]:
    """:func:`waiting` of every budget, told apart per queue: ``(queue name, waiting)``, so
    a reader wanting both the deferred jobs per queue and per budget (the metrics) reads the
    scheduled executions once instead of twice."""
    executions = sa.select(
        DEFERRED_KEY.label("rate_limit_key"), SCHEDULED.c.queue_name, SCHEDULED.c.scheduled_at
    ).subquery()
    deferred_key = executions.c.rate_limit_key
    query = (
        sa.select(
            executions.c.queue_name,
            deferred_key,
            sa.func.count(),
            sa.func.min(executions.c.scheduled_at),
        )
        .where(deferred_key.is_not(None))
        .group_by(executions.c.queue_name, deferred_key)
    )
    return [(queue, Waiting(key, size, at)) for queue, key, size, at in connection.execute(query)]
