"""Wake-ups across machines on PostgreSQL: ``LISTEN`` on a connection of its own.

A transaction that makes jobs ready (the dispatcher's) or defers them (a claim's) sends
``NOTIFY`` in itself (see :mod:`flask_solidq.storage.dialects.postgresql`), so PostgreSQL
delivers it when, and only if, that transaction commits, to every listener on any machine.
Only those transactions notify, never an enqueue: a ``NOTIFY`` takes a lock at commit that
serializes the committing transactions that notified, which one dispatcher and the claims
that defer can afford and a stream of web requests shouldn't pay.

The listener is a plain file descriptor to wait on beside the process's own wake-up pipe.
Lost, it is noticed on the next read and opened again on the next poll; meanwhile the
process polls, as it would anyway.

Behind a pooler, a notification only reaches a session the server keeps: the listener
connects through the direct URL of ``SOLIDQ_DATABASE_LISTEN_URL`` (see
:func:`flask_solidq.storage.pooler.listen_engine`). Without one nobody listens, nobody notifies, and
``flask solidq work`` says so once at start (:func:`warn_if_unheard`).
"""

from __future__ import annotations

import logging
import typing as t

import sqlalchemy as sa

from flask_solidq.processes.outage import is_unreachable
from flask_solidq.storage import pooler

if t.TYPE_CHECKING:
    from flask_solidq.config import Settings

logger = logging.getLogger("flask_solidq")


def warn_if_unheard(settings: Settings) -> None:
    """Warn once, as ``flask solidq work`` starts, when its processes can't hear PostgreSQL's
    wake-ups: behind a pooler without a direct URL to listen on."""
    if settings.database_pooler is None or settings.database_listen_url is not None:
        return
    logger.warning(
        "SolidQ polls instead of listening for wake-ups: SOLIDQ_DATABASE_POOLER is set and"
        " SOLIDQ_DATABASE_LISTEN_URL is not, and a pooler drops the notifications of the"
        " sessions it doesn't keep. Jobs made ready or deferred on another machine wait for"
        " a poll (a dispatcher's every %gs at most); set SOLIDQ_DATABASE_LISTEN_URL to a URL"
        " of the same database that reaches PostgreSQL directly (or through session pooling)",
        pooler.UNHEARD_POLLING_INTERVAL,
    )


class PostgresListener:
    """A dedicated connection listening on ``channels``, through ``engine`` or, behind a
    pooler, the engine of the direct listen URL."""

    def __init__(self, engine: sa.Engine, channels: t.Sequence[str]) -> None:
        self.engine = pooler.listen_engine(engine) or engine
        self.channels = list(channels)
        # Any: psycopg's connection (the driver is optional, so its types are not imported).
        self._connection: t.Any = None
        self._warned = False
        self._listened = False

    @property
    def is_open(self) -> bool:
        """Whether it holds a connection (that may have broken since it was last read)."""
        return self._connection is not None

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
        self._listened = True
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
        """Poll until the listener opens again, saying so once: at INFO when a listener that
        worked lost its database (the process's outage warning says that), at WARNING
        otherwise (a listen URL that never answered, a listener refused)."""
        self.close()
        if not self._warned:
            level = logging.INFO if self._listened and is_unreachable(error) else logging.WARNING
            logger.log(level, "SolidQ can't listen for wake-ups (%s); polling until it can", error)
            self._warned = True
