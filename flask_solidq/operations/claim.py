"""Claim: ready executions become claimed executions of one process (the worker's hot path).

One transaction per queue relation, as in Solid Queue: lock up to ``limit`` ready rows in
priority order (``FOR UPDATE SKIP LOCKED``, so workers never wait on each other), insert their
claims, delete them from ready by primary key, and read the claimed jobs' payloads, so the
worker threads need no query of their own. Paused queues are filtered inside the same select
(``NOT IN`` over the small pauses table), which saves a query per poll. Queue order beats
priority: a later queue is only read when the earlier ones had fewer jobs than the limit.

On PostgreSQL the whole claim is one statement (data-modifying CTEs), in autocommit.
"""

from __future__ import annotations

import dataclasses
import functools
import typing as t

import sqlalchemy as sa

from flask_solidq import db
from flask_solidq import models
from flask_solidq.timing import naive_utc
from flask_solidq.timing import utcnow

READY = t.cast(sa.Table, models.ReadyExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
JOBS = t.cast(sa.Table, models.JobRecord.__table__)
PAUSES = t.cast(sa.Table, models.Pause.__table__)

INSERT_CLAIMED = CLAIMED.insert()

#: How many times a claim that deadlocked (MySQL) or found the database locked is tried again.
DEADLOCK_RETRIES = 3


class ClaimedJob(t.NamedTuple):
    """A claimed job, with what performing it needs."""

    id: int
    active_job_id: str | None
    class_name: str
    queue_name: str
    priority: int
    arguments: str | None
    concurrency_key: str | None
    rate_limit_key: str | None


@dataclasses.dataclass(frozen=True)
class QueueSelector:
    """A worker's ``queues``: ``"*"`` (every queue), exact names, and ``"prefix*"`` patterns,
    in priority order."""

    queues: tuple[str, ...]

    @property
    def all_queues(self) -> bool:
        return "*" in self.queues

    @property
    def has_prefixes(self) -> bool:
        return not self.all_queues and any(queue.endswith("*") for queue in self.queues)

    def relations(self, engine: sa.Engine) -> list[str | None]:
        """The queue names to claim from, in order; ``None`` stands for every queue at once.

        Exact names are used as given; a prefix is expanded to the ready queues it matches
        (one ``SELECT DISTINCT`` per poll), each prefix's matches taking its place in the order.
        """
        if self.all_queues:
            return [None]
        if not self.has_prefixes:
            return list(self.queues)
        names: list[str | None] = []
        with db.read(engine) as connection:
            for queue in self.queues:
                matches = (
                    _ready_queues_like(connection, queue[:-1]) if queue.endswith("*") else [queue]
                )
                names.extend(name for name in matches if name not in names)
        return names


def claim(
    engine: sa.Engine,
    selector: QueueSelector,
    limit: int,
    process_id: int,
    *,
    skip_locked: bool = True,
) -> list[ClaimedJob]:
    """Claim up to ``limit`` ready jobs for ``process_id`` and return them, queue by queue.

    Each queue's claim commits on its own. A deadlock (MySQL) is tried again.
    """
    claimed: list[ClaimedJob] = []
    for queue_name in selector.relations(engine):
        if len(claimed) >= limit:
            break
        claimed.extend(
            db.retrying_deadlocks(
                functools.partial(
                    _claim_from, engine, queue_name, limit - len(claimed), process_id, skip_locked
                ),
                attempts=DEADLOCK_RETRIES,
            )
        )
    return claimed


def _claim_from(
    engine: sa.Engine, queue_name: str | None, limit: int, process_id: int, skip_locked: bool
) -> list[ClaimedJob]:
    params = {"queue_name": queue_name, "limit": limit, "process_id": process_id}
    if db.supports_insert_in_cte(engine) and not db.in_transaction(engine):
        return _claim_in_one_statement(engine, params, skip_locked)
    with db.write(engine) as connection:
        candidates = connection.execute(_candidates(queue_name, skip_locked), params).all()
        if not candidates:
            return []
        now = utcnow()
        job_ids = [job_id for _, job_id in candidates]
        connection.execute(
            INSERT_CLAIMED,
            [{"job_id": job_id, "process_id": process_id, "created_at": now} for job_id in job_ids],
        )
        # By primary key: deleting by job_id deadlocked on MySQL (Solid Queue PR #240).
        connection.execute(_DELETE_READY, {"ids": [id_ for id_, _ in candidates]})
        jobs = connection.execute(_SELECT_CLAIMED_JOBS, {"ids": job_ids}).all()
    by_id = {row.id: ClaimedJob(*row) for row in jobs}
    return [by_id[job_id] for job_id in job_ids if job_id in by_id]


def _claim_in_one_statement(
    engine: sa.Engine, params: dict[str, t.Any], skip_locked: bool
) -> list[ClaimedJob]:
    """PostgreSQL: the whole claim as one statement in autocommit, one round trip instead of
    six (data-modifying CTEs lock, delete, insert and read in one go)."""
    statement = _ONE_STATEMENT[(params["queue_name"] is not None, skip_locked)]
    with db.autocommit(engine) as connection:
        rows = connection.execute(statement, {**params, "now": naive_utc(utcnow())}).all()
    return sorted((ClaimedJob(*row) for row in rows), key=lambda job: (job.priority, job.id))


def _candidates(queue_name: str | None, skip_locked: bool) -> sa.Select[t.Any]:
    """The ready rows to claim: in priority then job order, skipping paused queues."""
    return _CANDIDATES[(queue_name is not None, skip_locked)]


def _build_candidates(by_queue: bool, skip_locked: bool) -> sa.Select[t.Any]:
    query = sa.select(READY.c.id, READY.c.job_id).where(
        READY.c.queue_name.not_in(sa.select(PAUSES.c.queue_name))
    )
    if by_queue:
        query = query.where(READY.c.queue_name == sa.bindparam("queue_name"))
    query = query.order_by(READY.c.priority, READY.c.job_id).limit(sa.bindparam("limit"))
    return db.for_update(query, skip_locked=skip_locked)


def _build_one_statement(by_queue: bool, skip_locked: bool) -> sa.TextClause:
    queue_filter = "AND queue_name = :queue_name" if by_queue else ""
    lock = "FOR UPDATE SKIP LOCKED" if skip_locked else "FOR UPDATE"
    return sa.text(
        f"""
        WITH candidates AS (
            SELECT id, job_id FROM solidq_ready_executions
            WHERE queue_name NOT IN (SELECT queue_name FROM solidq_pauses) {queue_filter}
            ORDER BY priority, job_id
            LIMIT :limit
            {lock}
        ), deleted AS (
            DELETE FROM solidq_ready_executions AS ready USING candidates
            WHERE ready.id = candidates.id
            RETURNING ready.job_id
        ), claimed AS (
            INSERT INTO solidq_claimed_executions (job_id, process_id, created_at)
            SELECT job_id, :process_id, :now FROM deleted
            RETURNING job_id
        )
        SELECT jobs.id, jobs.active_job_id, jobs.class_name, jobs.queue_name, jobs.priority,
               jobs.arguments, jobs.concurrency_key, jobs.rate_limit_key
        FROM solidq_jobs AS jobs JOIN claimed ON claimed.job_id = jobs.id
        """
    )


_VARIANTS = [(by_queue, skip_locked) for by_queue in (False, True) for skip_locked in (False, True)]
_CANDIDATES = {variant: _build_candidates(*variant) for variant in _VARIANTS}
_ONE_STATEMENT = {variant: _build_one_statement(*variant) for variant in _VARIANTS}
_DELETE_READY = READY.delete().where(READY.c.id.in_(sa.bindparam("ids", expanding=True)))


def _ready_queues_like(connection: sa.Connection, prefix: str) -> list[str]:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    query = (
        sa.select(READY.c.queue_name)
        .where(READY.c.queue_name.like(f"{escaped}%", escape="\\"))
        .distinct()
        .order_by(READY.c.queue_name)
    )
    return list(connection.scalars(query))


_SELECT_CLAIMED_JOBS = sa.select(
    JOBS.c.id,
    JOBS.c.active_job_id,
    JOBS.c.class_name,
    JOBS.c.queue_name,
    JOBS.c.priority,
    JOBS.c.arguments,
    JOBS.c.concurrency_key,
    JOBS.c.rate_limit_key,
).where(JOBS.c.id.in_(sa.bindparam("ids", expanding=True)))
