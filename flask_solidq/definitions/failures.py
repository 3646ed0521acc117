"""``retry_on`` and ``discard_on``: what a job does when ``perform`` raises.

A retry is a new attempt of the same job, scheduled after a wait, up to ``attempts`` runs in
all; when they run out the job fails (or the rule's ``fallback`` decides). A discard finishes
the job with nothing failed. Rules declared later, and a subclass's rules, win over earlier and
inherited ones, as they do in Active Job (for decorators: the outer one wins).
"""

from __future__ import annotations

import datetime as dt
import typing as t

from flask_solidq.definitions import declarations
from flask_solidq.definitions import declared
from flask_solidq.definitions import options
from flask_solidq.definitions.declarations import Target
from flask_solidq.definitions.declared import DeclaredAttributes
from flask_solidq.definitions.failure_rules import POLYNOMIALLY_LONGER
from flask_solidq.definitions.failure_rules import UNLIMITED
from flask_solidq.definitions.failure_rules import DiscardRule
from flask_solidq.definitions.failure_rules import Handler
from flask_solidq.definitions.failure_rules import RetryRule
from flask_solidq.definitions.failure_rules import Wait
from flask_solidq.timing import to_seconds

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job


def retry_on(
    *exceptions: type[BaseException],
    wait: float | dt.timedelta | str | t.Callable[[int], float | dt.timedelta] = 3,
    attempts: int | str = 5,
    jitter: float = 0.15,
    queue: str | None = None,
    priority: int | None = None,
    fallback: Handler | None = None,
) -> t.Callable[[Target], Target]:
    """Retry the job when ``perform`` raises one of ``exceptions``.

    :param wait: seconds or a timedelta before the next attempt; ``"polynomially_longer"``
        (``executions ** 4 + 2`` seconds); or a callable taking the number of runs so far and
        returning seconds.
    :param attempts: runs in all, the first included; ``"unlimited"`` never gives up.
    :param jitter: up to this fraction of the wait is added at random, so retries of many jobs
        that failed together don't all come back at once.
    :param queue: run the retries on this queue instead of the job's.
    :param priority: run the retries with this priority instead of the job's.
    :param fallback: called with ``(job, error)`` when the attempts run out; the job then
        finishes instead of failing, unless ``fallback`` raises.
    :raises ValueError, TypeError: an option is invalid.
    """
    name = "retry_on"
    rule = RetryRule(
        exceptions=_exception_classes(exceptions, decorator=name),
        wait=_wait(wait),
        attempts=(
            None
            if attempts == UNLIMITED
            else options.positive_int(attempts, option="attempts", decorator=name)
        ),
        jitter=_jitter(jitter),
        queue=_optional_queue(queue),
        priority=_optional_priority(priority),
        fallback=_optional_callable(fallback, option="fallback", decorator=name),
    )

    return lambda target: declarations.declare(target, _adding(rule), decorator=name)


def discard_on(
    *exceptions: type[BaseException],
    callback: Handler | None = None,
) -> t.Callable[[Target], Target]:
    """Finish the job without failing it when ``perform`` raises one of ``exceptions``.

    :param callback: called with ``(job, error)`` before the job is discarded.
    :raises TypeError: an option is invalid.
    """
    name = "discard_on"
    rule = DiscardRule(
        exceptions=_exception_classes(exceptions, decorator=name),
        callback=_optional_callable(callback, option="callback", decorator=name),
    )

    return lambda target: declarations.declare(target, _adding(rule), decorator=name)


def _adding(rule: RetryRule | DiscardRule) -> declarations.Apply:
    """Applies ``rule`` after the class's other rules (inherited ones first), so it wins."""

    def apply(job_class: type[DeclaredAttributes]) -> None:
        declared.declare_on(job_class, failure_rules=(*job_class._failure_rules, rule))

    return apply


def find_rule(job_class: type[Job], error: BaseException) -> RetryRule | DiscardRule | None:
    """The rule that handles ``error``: the last applied one that matches. A subclass's rules
    come after its parents', and an outer decorator after an inner one, so they win."""
    for rule in reversed(job_class._failure_rules):
        if isinstance(error, rule.exceptions):
            return rule
    return None


def _exception_classes(
    exceptions: tuple[object, ...], *, decorator: str
) -> tuple[type[BaseException], ...]:
    if not exceptions:
        raise TypeError(f"{decorator}() needs at least one exception class, such as TimeoutError.")
    classes: list[type[BaseException]] = []
    for exc in exceptions:
        if not (isinstance(exc, type) and issubclass(exc, BaseException)):
            raise TypeError(f"{decorator}() takes exception classes, not {exc!r}.")
        classes.append(exc)
    return tuple(classes)


def _wait(value: object) -> Wait:
    if value == POLYNOMIALLY_LONGER:
        return POLYNOMIALLY_LONGER
    if callable(value):
        return value
    if isinstance(value, str):
        raise ValueError(
            f"retry_on(wait=) takes seconds, a timedelta, {POLYNOMIALLY_LONGER!r} or a callable,"
            f" not {value!r}."
        )
    return to_seconds(value, name="retry_on(wait=)", allow_zero=True)


def _jitter(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"retry_on(jitter=) must be a fraction from 0 to 1, not {value!r}.")
    return float(value)


def _optional_queue(value: object) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"retry_on(queue=) must be a queue name, not {value!r}.")
    return value


def _optional_priority(value: object) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"retry_on(priority=) must be an int, not {value!r}.")
    return value


def _optional_callable(value: object, *, option: str, decorator: str) -> Handler | None:
    if value is None:
        return None
    if not callable(value):
        raise TypeError(f"{decorator}({option}=) must be callable, not {value!r}.")
    return value
