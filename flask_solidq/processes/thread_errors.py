"""The errors a queue's threads carry on through: what each thread was doing
(:class:`ThreadActivity`), and :func:`report_thread_error`, which hands such an error to
``signals.thread_error`` and ``SOLIDQ_ON_THREAD_ERROR``.

Below both :mod:`.base` (a process reports its threads' errors) and :mod:`.outage` (an
outage reports the failures it is told of), which each need the type.
"""

from __future__ import annotations

import enum
import logging
import typing as t

from flask_solidq import signals

if t.TYPE_CHECKING:
    from flask import Flask

logger = logging.getLogger("flask_solidq")


class ThreadActivity(str, enum.Enum):
    """What a queue's thread was doing when it hit an error: ``where`` in
    ``signals.thread_error``."""

    #: A poll: a worker's claim, a dispatcher's dispatch (and concurrency maintenance), the
    #: scheduler's enqueue of due tasks.
    POLL = "poll"
    #: A worker's finisher storing its jobs' outcomes.
    FINISH = "finish"
    #: A process's heartbeat.
    HEARTBEAT = "heartbeat"
    #: A supervisor's pruning of silent processes.
    MAINTENANCE = "maintenance"
    #: A process deregistering as it stops.
    SHUTDOWN = "shutdown"


def report_thread_error(
    app: Flask, error: BaseException, *, where: ThreadActivity, process: str
) -> None:
    """Hand an error a queue's thread carries on through to ``signals.thread_error`` and
    ``SOLIDQ_ON_THREAD_ERROR``, in an app context. Neither can raise into the thread: a
    receiver's or the hook's own error is logged."""
    with app.app_context():
        signals.send_safely(signals.thread_error, None, error=error, where=where, process=process)
        hook = app.extensions["solidq"].settings.on_thread_error
        if hook is None:
            return
        try:
            hook(error)
        # The hook is the app's error reporting: when it fails too, the log is what's left.
        except Exception:
            logger.exception(
                "SolidQ: SOLIDQ_ON_THREAD_ERROR raised on an error of %s (%s); carrying on",
                process,
                where.value,
            )
