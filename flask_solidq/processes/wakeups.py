"""Wake-ups inside one process: a new ready job wakes the idle workers of this process at
once, and a newly scheduled job wakes the dispatcher if it's due before the dispatcher's next
poll. Across processes, workers and dispatchers poll."""

from __future__ import annotations

import datetime as dt
import threading
import typing as t

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
                callbacks.remove(callback)  # type: ignore[arg-type]


def ready() -> None:
    """A job became ready in this process."""
    for callback in list(_on_ready):
        callback()


def scheduled(at: dt.datetime) -> None:
    """A job was scheduled for ``at`` in this process."""
    for callback in list(_on_scheduled):
        callback(at)
