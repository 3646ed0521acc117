"""Job notices: a process that makes jobs ready wakes the idle workers, and one that schedules a
job wakes the dispatchers if it's due before their next poll, instead of leaving them to their
polling intervals.

Three reaches, each used where it is the cheapest that arrives:

* inside one process (thread mode, or the web process's own threads): callbacks;
* between the processes of one machine on one database: Unix datagram sockets
  (:mod:`~flask_solidq.processes.host_bell`);
* on PostgreSQL, across machines: ``NOTIFY`` sent inside the transaction that made jobs ready
  (the dispatcher's) or deferred them (a claim's), heard through ``LISTEN``
  (:mod:`~flask_solidq.processes.pg_listener`). Where the database notifies, the machine's
  sockets aren't rung for the same event, so nobody wakes twice.

Polling stays the fallback: a wake-up lost (a socket gone, a listener reconnecting) costs at
most one polling interval.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import threading
import typing as t

from flask_solidq.operations.queue_selector import QueueSelector
from flask_solidq.processes.host_bell import DISPATCHER
from flask_solidq.processes.host_bell import WORKER
from flask_solidq.processes.host_bell import HostBell
from flask_solidq.processes.pg_listener import PostgresListener
from flask_solidq.storage import db
from flask_solidq.timing import UTC

if t.TYPE_CHECKING:
    import sqlalchemy as sa

    from flask_solidq.processes.host_bell import Listener
    from flask_solidq.processes.signal_safe_waker import Watched

#: The longest list of queue names a wake-up carries; a longer one is sent as no list (every
#: worker wakes), since a datagram is read 256 bytes at most.
MAX_QUEUES_PAYLOAD = 240

_lock = threading.Lock()
_on_ready: list[t.Callable[[], None]] = []
_on_scheduled: list[t.Callable[[dt.datetime], None]] = []


def listen_ready(callback: t.Callable[[], None]) -> None:
    """Call ``callback`` whenever this process makes a job ready."""
    with _lock:
        _on_ready.append(callback)


def listen_scheduled(callback: t.Callable[[dt.datetime], None]) -> None:
    """Call ``callback`` with the due time whenever this process schedules a job."""
    with _lock:
        _on_scheduled.append(callback)


def forget(callback: t.Callable[..., None]) -> None:
    """Stop calling ``callback``."""
    with _lock:
        for callbacks in (_on_ready, _on_scheduled):
            if callback in callbacks:
                callbacks.remove(callback)


def ready() -> None:
    """A job became ready in this process."""
    for callback in list(_on_ready):
        callback()


def scheduled(at: dt.datetime) -> None:
    """A job was scheduled for ``at`` in this process."""
    for callback in list(_on_scheduled):
        callback(at)


def announce_ready(engine: sa.Engine, *, notified: bool, queues: t.Collection[str] = ()) -> None:
    """Jobs became ready (committed) on ``queues`` (empty: not said): wake this process's
    workers, and this machine's unless the database already notified every listener
    (``notified``). The machine's workers hear the queues, and a worker that claims from none
    of them sleeps on: an enqueue woke every idle worker of the machine, and each ran a claim
    that found nothing (12 idle workers of another queue halved a PostgreSQL enqueue rate)."""
    ready()
    if notified:
        return
    bell = _bell(engine)
    if not bell.may_have_listeners():
        return
    payload = encode_queues(queues)
    only = functools.partial(_claims_from_any, payload) if payload else None
    bell.ring(WORKER, payload, only=only)


def worker_tag(selector: QueueSelector) -> str:
    """What a worker's socket says of it (see :meth:`HostBell.listen`): its queues."""
    return json.dumps(list(selector.queues))


@functools.lru_cache(maxsize=1024)
def _claims_from_any(payload: bytes, tag: str) -> bool:
    """Whether the worker whose socket says ``tag`` claims from one of the queues a ready
    wake-up's ``payload`` names (a tag that isn't a list of queues: yes, it may). Both come
    from a small set (a machine's workers, an app's queues), so each answer is kept."""
    try:
        selector = QueueSelector(tuple(json.loads(tag)))
    except (ValueError, TypeError):
        return True
    return any(selector.matches(queue) for queue in decode_queues(payload))


def encode_queues(queues: t.Collection[str]) -> bytes:
    """The queues of a ready wake-up as its payload (a JSON list); nothing when there are
    none or too many to carry."""
    if not queues:
        return b""
    return _encoded(frozenset(queues))


@functools.lru_cache(maxsize=256)
def _encoded(queues: frozenset[str]) -> bytes:
    """:func:`encode_queues` of a set of queues, kept: an app enqueues to a few queues, and
    every single enqueue asked for this again."""
    payload = json.dumps(sorted(queues)).encode()
    return payload if len(payload) <= MAX_QUEUES_PAYLOAD else b""


def concerns(payload: bytes | str, claims_from: t.Callable[[str], bool]) -> bool:
    """Whether a ready wake-up with ``payload`` is for a worker that claims from the queues
    ``claims_from`` accepts: one that names no queue is for every worker."""
    queues = decode_queues(payload)
    return not queues or any(claims_from(queue) for queue in queues)


def decode_queues(payload: bytes | str) -> list[str]:
    """The queues a ready wake-up names; empty for one that names none (the database's
    notification carries none): it is for every worker."""
    try:
        queues = json.loads(payload) if payload else []
    except ValueError:
        return []
    return [name for name in queues if isinstance(name, str)] if isinstance(queues, list) else []


def announce_scheduled(engine: sa.Engine, at: dt.datetime, *, notified: bool) -> None:
    """A job was scheduled for ``at`` (committed): wake the dispatchers that would otherwise
    sleep past it, in this process and, unless the database notified, on this machine."""
    scheduled(at)
    if notified:
        return
    bell = _bell(engine)
    if bell.may_have_listeners():
        bell.ring(DISPATCHER, encode_time(at))


def encode_time(at: dt.datetime) -> bytes:
    """A due time as a wake-up's payload: POSIX seconds."""
    return repr(at.timestamp()).encode()


def decode_time(payload: bytes | str) -> dt.datetime | None:
    """The due time a wake-up carries; None for a payload that holds none."""
    try:
        return dt.datetime.fromtimestamp(float(payload), UTC)
    except (TypeError, ValueError, OverflowError):
        return None


@functools.lru_cache(maxsize=32)
def _bell(engine: sa.Engine) -> HostBell:
    return _bell_of(engine.url)


@functools.lru_cache(maxsize=64)
def _bell_of(url: sa.URL) -> HostBell:
    """One :class:`HostBell` a database URL: its directory's name is a hash of the URL, which
    every enqueue used to compute again (a relative SQLite path is made absolute once, as the
    engine's first connection opened it)."""
    return HostBell(url)


class Subscription:
    """What a worker or dispatcher hears from other processes: its machine's socket of its
    kind and, on PostgreSQL, the database's notifications on its channel. Each message is
    handed to ``on_message`` with its payload (empty for "jobs are ready").

    Both listen from the moment the subscription exists, which the process makes before its
    first poll: a notification sent between that poll and its first sleep is heard, not lost
    to a polling interval (the listener used to connect at the first sleep, and a job made
    ready in between waited a whole interval). A database listener that was lost and
    connects again calls ``on_gap``: what was notified meanwhile went unheard, so the
    process polls once more at once."""

    def __init__(
        self,
        engine: sa.Engine,
        kind: str,
        on_message: t.Callable[[bytes | str], None],
        *,
        tag: str = "",
        on_gap: t.Callable[[], None] | None = None,
    ) -> None:
        self.kind = kind
        self.on_message = on_message
        self.on_gap = on_gap
        self._host: Listener | None = _bell(engine).listen(kind, tag)
        self._database: PostgresListener | None = None
        if db.supports_listen_notify(engine):
            channel = db.READY_CHANNEL if kind == WORKER else db.SCHEDULED_CHANNEL
            self._database = PostgresListener(engine, [channel])
            self._database.open()

    def watched(self) -> list[Watched]:
        """The descriptors to wait on now, with their handlers (reconnecting the database
        listener if it was lost)."""
        watched: list[Watched] = []
        if self._host is not None:
            watched.append((self._host.fileno(), self._read_host))
        if self._database is not None and self._listening():
            fileno = self._database.fileno()
            if fileno is not None:
                watched.append((fileno, self._read_database))
        return watched

    def close(self) -> None:
        if self._host is not None:
            self._host.close()
        if self._database is not None:
            self._database.close()

    def _listening(self) -> bool:
        """Whether the database listener listens, connecting it if it was lost (and then
        calling ``on_gap``)."""
        database = t.cast(PostgresListener, self._database)
        if database.is_open:
            return True
        if not database.open():
            return False
        if self.on_gap is not None:
            self.on_gap()
        return True

    def _read_host(self) -> None:
        for message in t.cast("Listener", self._host).drain():
            self.on_message(message)

    def _read_database(self) -> None:
        for _channel, payload in t.cast(PostgresListener, self._database).drain():
            self.on_message(payload)
