"""Which queues a worker claims from (``SOLIDQ_WORKERS[i]["queues"]``), and their order."""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from flask_solidq.models.tables import READY
from flask_solidq.storage import db


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

    def matches(self, queue_name: str) -> bool:
        """Whether this selector claims from ``queue_name``."""
        return any(
            queue == "*"
            or queue == queue_name
            or (queue.endswith("*") and queue_name.startswith(queue[:-1]))
            for queue in self.queues
        )

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

    def clause(self, column: sa.ColumnElement[str]) -> sa.ColumnElement[bool]:
        """Whether ``column`` (a queue name) is one this selector claims from, in SQL."""
        if self.all_queues:
            return sa.true()
        names = [queue for queue in self.queues if not queue.endswith("*")]
        tests = [_like_prefix(column, queue[:-1]) for queue in self.queues if queue.endswith("*")]
        if names:
            tests.append(column.in_(names))
        return sa.or_(*tests)


def _like_prefix(column: sa.ColumnElement[str], prefix: str) -> sa.ColumnElement[bool]:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return column.like(f"{escaped}%", escape="\\")


def _ready_queues_like(connection: sa.Connection, prefix: str) -> list[str]:
    query = (
        sa.select(READY.c.queue_name)
        .where(_like_prefix(READY.c.queue_name, prefix))
        .distinct()
        .order_by(READY.c.queue_name)
    )
    return list(connection.scalars(query))
