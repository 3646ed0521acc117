"""OS signals (here "interrupts", to keep "signal" for blinker's), turned into a queue the
main loop reads, so that handlers do nothing but record what arrived and ring a pipe (no
lock: see :mod:`flask_solidq.processes.signal_safe_waker`).

TERM and INT ask for a graceful stop; a second one, or QUIT, for an immediate one (what
people expect of a second Ctrl-C). Who counts is the supervisor: a terminal's Ctrl-C reaches
every process of the group, and a child also gets TERM from its supervisor, so a child can't
tell a second Ctrl-C from the first."""

from __future__ import annotations

import collections
import signal
import threading
import types
import typing as t

from flask_solidq.processes.signal_safe_waker import Waker

GRACEFUL = (signal.SIGTERM, signal.SIGINT)
IMMEDIATE = (signal.SIGQUIT,)

#: A signal's handler as :func:`signal.signal` takes and returns it: a function, or one of
#: ``SIG_DFL`` and ``SIG_IGN``, or None (installed from outside Python).
Handler = t.Callable[[int, types.FrameType | None], object] | int | None


class Interrupts:
    """The interrupts a process received and hasn't handled yet."""

    def __init__(self, signums: t.Iterable[int] = (*GRACEFUL, *IMMEDIATE)) -> None:
        self.signums = tuple(signums)
        self._pending: collections.deque[int] = collections.deque()
        self._waker = Waker()
        self._previous: dict[int, Handler] = {}

    def install(self) -> bool:
        """Start recording ``signums``; return whether it could. Only the main thread may
        handle signals: a supervisor running in another thread (a thread-mode worker next to
        a web server) is stopped with ``stop()`` instead."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for signum in self.signums:
            self._previous[signum] = signal.signal(signum, self._record)
        return True

    def restore(self) -> None:
        """Put back the handlers :meth:`install` replaced."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def wait(self, timeout: float) -> list[int]:
        """Wait up to ``timeout`` seconds for an interrupt; return those that arrived."""
        if not self._pending:
            self._waker.sleep(timeout)
        arrived = []
        while self._pending:
            arrived.append(self._pending.popleft())
        return arrived

    def wake(self) -> None:
        """End a :meth:`wait` early, with nothing arrived."""
        self._waker.ring()

    def _record(self, signum: int, _frame: types.FrameType | None) -> None:
        self._pending.append(signum)
        self._waker.ring()


def name(signum: int) -> str:
    """``SIGINT``, ``SIGTERM``..."""
    return signal.Signals(signum).name


def stop_now_hint(signum: int) -> str:
    """How to turn the graceful stop ``signum`` asked for into an immediate one."""
    if signum == signal.SIGINT:
        return "press Ctrl-C again to stop now"
    return f"send {name(signum)} again (or SIGQUIT) to stop now"
