"""Reading what the controls store, a page at a time, for the dashboard: rate-limit budgets,
open coalesce keys, blocked concurrency keys with their semaphores, and processes. Read-only.

Every list is keyset-paginated on a unique, indexed column (``after``: the last value of the
previous page), so a page costs the same with a million keys as with ten. The figures per job
name (:func:`flask_solidq.reads.queue_figures.coalesce_summary`) and the deferred jobs per
budget (:func:`flask_solidq.controls.rate_limit.budgets.waiting`) are read where they already live.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import typing as t

import sqlalchemy as sa

from flask_solidq.controls import rate_limit
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import gcra
from flask_solidq.controls.rate_limit.available import (
    admits_available as admits_available,  # re-exported
)
from flask_solidq.formatting import format_when
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import BUDGETS
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import PROCESSES
from flask_solidq.models.tables import RECURRING_EXECUTIONS
from flask_solidq.models.tables import RECURRING_TASKS
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.models.tables import SEMAPHORES
from flask_solidq.reads.process_row import ProcessRow

#: The most rows one page lists.
MAX_PAGE = 500
#: The most running holders named per concurrency key.
MAX_HOLDERS = 10
#: The most stacked budgets listed beside a main budget with waiting jobs.
MAX_STACKED = 10


class BudgetRow(t.NamedTuple):
    """A ``solidq_rate_limits`` row: its key and GCRA times."""

    key: str
    tat: dt.datetime
    last_slot_at: dt.datetime | None
    updated_at: dt.datetime
    #: Its recent admissions (:mod:`flask_solidq.controls.rate_limit.admission_ring`).
    admissions: str | None = None
    #: Until when an API's 429 paused it (None: never paused).
    backed_off_until: dt.datetime | None = None

    @property
    def budget(self) -> gcra.Budget:
        return gcra.Budget(
            self.tat, self.last_slot_at, self.admissions, backed_off_until=self.backed_off_until
        )


class OpenKey(t.NamedTuple):
    """An open coalesce key and the job later calls with it join."""

    id: int
    key: str
    job_id: int
    class_name: str
    calls_count: int
    created_at: dt.datetime


class BlockedKey(t.NamedTuple):
    """A concurrency key with blocked jobs: how many, the oldest one's time, and its
    semaphore (free slots and lease end; None when it has no row)."""

    key: str
    size: int
    oldest_at: dt.datetime
    free_slots: int | None
    expires_at: dt.datetime | None


def budget_page(
    connection: sa.Connection, *, after: str | None = None, limit: int = 50
) -> list[BudgetRow]:
    """Up to ``limit`` budgets by key, those after ``after``."""
    statement = sa.select(
        BUDGETS.c.key,
        BUDGETS.c.tat,
        BUDGETS.c.last_slot_at,
        BUDGETS.c.updated_at,
        BUDGETS.c.admissions,
        BUDGETS.c.backed_off_until,
    ).order_by(BUDGETS.c.key)
    if after is not None:
        statement = statement.where(BUDGETS.c.key > after)
    return [BudgetRow(*row) for row in connection.execute(statement.limit(_cap(limit)))]


def open_key_page(
    connection: sa.Connection, *, after: int | None = None, limit: int = 50
) -> list[OpenKey]:
    """Up to ``limit`` open coalesce keys with their job's name, oldest first (by row id),
    those after the row id ``after``."""
    statement = (
        sa.select(
            COALESCE_KEYS.c.id,
            COALESCE_KEYS.c.key,
            COALESCE_KEYS.c.job_id,
            JOBS.c.class_name,
            COALESCE_KEYS.c.calls_count,
            COALESCE_KEYS.c.created_at,
        )
        .select_from(COALESCE_KEYS.join(JOBS, JOBS.c.id == COALESCE_KEYS.c.job_id))
        .order_by(COALESCE_KEYS.c.id)
    )
    if after is not None:
        statement = statement.where(COALESCE_KEYS.c.id > after)
    return [OpenKey(*row) for row in connection.execute(statement.limit(_cap(limit)))]


def blocked_key_page(
    connection: sa.Connection, *, after: str | None = None, limit: int = 50
) -> list[BlockedKey]:
    """Up to ``limit`` concurrency keys with blocked jobs, by key, those after ``after``;
    each with its semaphore. Grouped along the index blocked jobs are released by."""
    grouped = sa.select(
        BLOCKED.c.concurrency_key.label("key"),
        sa.func.count().label("size"),
        sa.func.min(BLOCKED.c.created_at).label("oldest_at"),
    ).group_by(BLOCKED.c.concurrency_key)
    if after is not None:
        grouped = grouped.where(BLOCKED.c.concurrency_key > after)
    page = grouped.order_by(BLOCKED.c.concurrency_key).limit(_cap(limit)).subquery()
    statement = (
        sa.select(
            page.c.key, page.c.size, page.c.oldest_at, SEMAPHORES.c.value, SEMAPHORES.c.expires_at
        )
        .select_from(page.outerjoin(SEMAPHORES, SEMAPHORES.c.key == page.c.key))
        .order_by(page.c.key)
    )
    return [
        BlockedKey(key, int(size), oldest, value, expires)
        for key, size, oldest, value, expires in connection.execute(statement)
    ]


def running_holders(connection: sa.Connection, keys: t.Sequence[str]) -> dict[str, list[int]]:
    """The running jobs (claimed executions) holding a slot of each of ``keys``, by job id, at
    most :data:`MAX_HOLDERS` a key. Read from the claimed executions (as many as the workers'
    threads) to their jobs, never a scan of the jobs. A ready job holds a slot too until a
    worker claims it; it isn't named here."""
    if not keys:
        return {}
    statement = (
        sa.select(JOBS.c.concurrency_key, JOBS.c.id)
        .select_from(CLAIMED.join(JOBS, JOBS.c.id == CLAIMED.c.job_id))
        .where(JOBS.c.concurrency_key.in_(keys))
        .order_by(JOBS.c.concurrency_key, JOBS.c.id)
    )
    holders: dict[str, list[int]] = {}
    for key, job_id in connection.execute(statement):
        named = holders.setdefault(key, [])
        if len(named) < MAX_HOLDERS:
            named.append(job_id)
    return holders


class SemaphoreRow(t.Protocol):
    """A semaphore as :func:`semaphore_page` reads it."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> int: ...
    @property
    def expires_at(self) -> dt.datetime: ...


def semaphore_page(
    connection: sa.Connection, *, after: str | None = None, limit: int = 50
) -> list[SemaphoreRow]:
    """Up to ``limit`` semaphores (key, value, expires_at) by key, those after ``after``."""
    statement = sa.select(SEMAPHORES.c.key, SEMAPHORES.c.value, SEMAPHORES.c.expires_at).order_by(
        SEMAPHORES.c.key
    )
    if after is not None:
        statement = statement.where(SEMAPHORES.c.key > after)
    return list(connection.execute(statement.limit(_cap(limit))))


def process_page(
    connection: sa.Connection, *, after: int | None = None, limit: int = 50
) -> list[ProcessRow]:
    """Up to ``limit`` registered processes by row id (the order they registered in),
    those after the row id ``after``."""
    statement = sa.select(PROCESSES).order_by(PROCESSES.c.id)
    if after is not None:
        statement = statement.where(PROCESSES.c.id > after)
    return list(connection.execute(statement.limit(_cap(limit))))


class RecurringRow(t.NamedTuple):
    """A stored recurring task and its last enqueued run (None before the first)."""

    key: str
    schedule: str
    class_name: str | None
    queue_name: str | None
    description: str | None
    last_run_at: dt.datetime | None


def recurring_page(
    connection: sa.Connection, *, after: str | None = None, limit: int = 50
) -> list[RecurringRow]:
    """Up to ``limit`` recurring tasks by key, those after ``after``, each with the time of
    its latest run from the ledger (one grouped query over the page's keys, along the
    ledger's unique index)."""
    statement = sa.select(
        RECURRING_TASKS.c.key,
        RECURRING_TASKS.c.schedule,
        RECURRING_TASKS.c.class_name,
        RECURRING_TASKS.c.queue_name,
        RECURRING_TASKS.c.description,
    ).order_by(RECURRING_TASKS.c.key)
    if after is not None:
        statement = statement.where(RECURRING_TASKS.c.key > after)
    tasks = list(connection.execute(statement.limit(_cap(limit))))
    if not tasks:
        return []
    last_runs: dict[str, dt.datetime] = dict(
        connection.execute(
            sa.select(RECURRING_EXECUTIONS.c.task_key, sa.func.max(RECURRING_EXECUTIONS.c.run_at))
            .where(RECURRING_EXECUTIONS.c.task_key.in_([task.key for task in tasks]))
            .group_by(RECURRING_EXECUTIONS.c.task_key)
        ).all()
    )
    return [RecurringRow(*task, last_runs.get(task.key)) for task in tasks]


@dataclasses.dataclass(frozen=True)
class BudgetOutlook:
    """What a budget allows now, by the limit its job declares in this app."""

    limit: rate_limit.RateLimit
    #: How many claims it would admit at once now: units, for a limit counted in units.
    available: int
    #: When its next claim (of one unit) would be admitted.
    next_admission_at: dt.datetime
    #: Whether :attr:`available` counts units (``limits_rate(cost=)``) rather than claims.
    counts_units: bool = False


def budget_outlook(key: str, budget: gcra.Budget | None, now: dt.datetime) -> BudgetOutlook | None:
    """The outlook of budget ``key`` as stored (``budget``; None: no row, it is idle), for the
    CLI's status and the dashboard alike; None when the job that declares its limit isn't
    imported by this app, so the limit is unknown. A stacked limit's budget
    (``"<group or job>/<name>/<key>"``) is read by its own limit, never its job's main one.
    Pure: nothing is charged."""
    declaration = rate_limit.declaration_for(key)
    if declaration is None:
        return None
    budget = budget or gcra.Budget()
    return BudgetOutlook(
        limit=declaration,
        available=admits_available(budget, gcra.rate_of(declaration), now),
        next_admission_at=budget.available_at(gcra.rate_of(declaration), now),
        counts_units=declaration.counts_units,
    )


def next_admission_at(outlook: BudgetOutlook, waiting: budgets.Waiting | None) -> dt.datetime:
    """When the budget next admits a job, as the dashboard, ``flask solidq status`` and the
    job page say it: with deferred jobs waiting, the first one's slot, or later while the
    budget is spent past it (a free admission now is for a new claim, not for them); with
    none waiting, when a new claim would be admitted."""
    slot_at = waiting.next_check_at if waiting else None
    return admitted_at(slot_at, outlook.next_admission_at)


def admitted_at(slot_at: dt.datetime | None, available_at: dt.datetime) -> dt.datetime:
    """When a job whose slot is ``slot_at`` (None: it has none, it is claimed as soon as it
    can be) is admitted by a budget that admits its next claim at ``available_at``."""
    return available_at if slot_at is None else max(slot_at, available_at)


def describe_next_admission(
    outlook: BudgetOutlook | None, waiting: budgets.Waiting | None, now: dt.datetime
) -> str:
    """:func:`next_admission_at` in words (``now``, ``in 1m01s``); ``?`` when the budget's
    limit is unknown (the job that declares it isn't imported by this app)."""
    if outlook is None:
        return "?"
    return format_when(next_admission_at(outlook, waiting), now)


def stacked_budget_keys(connection: sa.Connection, key: str) -> list[str]:
    """The other budgets the jobs deferred on main budget ``key`` are charged by (their
    stacked limits' budgets), read from their stored charges, at most :data:`MAX_STACKED`;
    none when they have a single budget. Deferred jobs are counted on their main budget
    (``rate_limit_key``) whichever budget refused them, so ``flask solidq status`` lists these
    beside it: the one that holds them back may be any of them. Jobs of one main budget may
    be charged by different others (a per-shop daily limit under one global limit): the
    distinct charges of up to :data:`MAX_STACKED` of them are read, along the scheduled
    executions, which are as many as the jobs waiting."""
    stored = connection.scalars(
        sa.select(JOBS.c.rate_limit_charges)
        .select_from(SCHEDULED.join(JOBS, JOBS.c.id == SCHEDULED.c.job_id))
        .where(JOBS.c.rate_limit_key == key, JOBS.c.rate_limit_charges.is_not(None))
        .distinct()
        .limit(MAX_STACKED)
    )
    others: dict[str, None] = {}
    for charges in stored:
        try:
            others.update((str(charge[1]), None) for charge in json.loads(charges))
        except (ValueError, TypeError, IndexError, KeyError):
            continue  # unreadable: the claim charges such a job by its main key alone
    return sorted(other for other in others if other and other != key)[:MAX_STACKED]


def _cap(limit: int) -> int:
    return max(1, min(limit, MAX_PAGE))
