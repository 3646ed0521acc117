"""The rules ``retry_on`` and ``discard_on`` declare, as plain data a job class keeps
(:mod:`.declared`): when a rule matches, how long a retry waits, and how many runs it allows.
The decorators are :mod:`.failures`'s."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import typing as t

from flask_solidq.timing import to_seconds

POLYNOMIALLY_LONGER = "polynomially_longer"
UNLIMITED = "unlimited"

Wait = float | str | t.Callable[[int], float | dt.timedelta]

#: A rule's ``fallback`` or ``callback``: called with the job and the error; what it returns
#: is ignored. Any: the job is the decorated class's own, which a callback may name as such.
Handler = t.Callable[[t.Any, BaseException], object]


@dataclasses.dataclass(frozen=True)
class RetryRule:
    """A validated ``retry_on`` declaration."""

    exceptions: tuple[type[BaseException], ...]
    wait: Wait
    attempts: int | None
    jitter: float
    queue: str | None
    priority: int | None
    fallback: Handler | None

    @property
    def name(self) -> str:
        """The key counting this rule's attempts in the job's ``exception_executions``."""
        return "[" + ", ".join(exc.__qualname__ for exc in self.exceptions) + "]"

    def is_exhausted(self, executions: int) -> bool:
        """Whether a job that has now run ``executions`` times under this rule may not retry."""
        return self.attempts is not None and executions >= self.attempts

    def wait_seconds(self, executions: int) -> float:
        """Seconds until the next attempt, after ``executions`` runs under this rule."""
        wait = self.wait
        if wait == POLYNOMIALLY_LONGER:
            base = executions**4 + 2.0
        elif callable(wait):
            base = to_seconds(wait(executions), name="retry_on(wait=) result", allow_zero=True)
        else:
            base = float(wait)
        return base + base * self.jitter * random.random()


@dataclasses.dataclass(frozen=True)
class DiscardRule:
    """A validated ``discard_on`` declaration."""

    exceptions: tuple[type[BaseException], ...]
    callback: Handler | None
