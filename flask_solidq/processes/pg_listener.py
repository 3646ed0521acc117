"""Wake-ups across machines on PostgreSQL: ``LISTEN`` on a connection of its own.

A transaction that makes jobs ready (the dispatcher's) or defers them (a claim's) sends
``NOTIFY`` in itself (see :mod:`flask_solidq.postgres`), so PostgreSQL delivers it when, and
only if, that transaction commits, to every listener on any machine. Only those transactions
notify, never an enqueue: a ``NOTIFY`` takes a lock at commit that serializes the committing
transactions that notified, which one dispatcher and the claims that defer can afford and a
stream of web requests shouldn't pay.

The listener is a plain file descriptor to wait on beside the process's own wake-up pipe.
Lost, it is noticed on the next read and opened again on the next poll; meanwhile the
process polls, as it would anyway.
"""

from __future__ import annotations

import logging
import typing as t

import sqlalchemy as sa

logger = logging.getLogger("flask_solidq")


class PostgresListener:
    """A dedicated connection listening on ``channels``."""

    def __init__(self, engine: sa.Engine, channels: t.Sequence[str]) -> None:
        self.engine = engine
        self.channels = list(channels)
        self._connection: t.Any = None
        self._warned = False

    def open(self) -> bool:
        """Connect and listen, unless already listening; say whether it listens."""
        if self._connection is not None:
            return True
        try:
            proxied = self.engine.raw_connection()
            self._connection = proxied.driver_connection
            proxied.detach()  # ours for good: the pool mustn't hand it to anyone else
            self._connection.autocommit = True
            for channel in self.channels:
                self._connection.execute(f"LISTEN {channel}")
        except Exception as error:  # noqa: BLE001 - any failure means: poll instead
            self._lost(error)
            return False
        if self._warned:
            logger.info("SolidQ hears %s again", ", ".join(self.channels))
            self._warned = False
        return True

    def fileno(self) -> int | None:
        """The descriptor to wait on; None when not listening."""
        if self._connection is None:
            return None
        try:
            return int(self._connection.fileno())
        except Exception as error:  # noqa: BLE001
            self._lost(error)
            return None

    def drain(self) -> list[tuple[str, str]]:
        """The notifications that arrived, as (channel, payload)."""
        if self._connection is None:
            return []
        try:
            return [(n.channel, n.payload) for n in self._connection.notifies(timeout=0)]
        except Exception as error:  # noqa: BLE001
            self._lost(error)
            return []

    def close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            self._connection = None

    def _lost(self, error: BaseException) -> None:
        self.close()
        if not self._warned:
            logger.warning("SolidQ can't listen for wake-ups (%s); polling until it can", error)
            self._warned = True
