"""Named budgets: rate-limit budgets declared by name (``solidq.rate_limiter.register``) and
shared by jobs (``limits_rate(budget=)``) and by code outside jobs (``rate_limiter.acquire``).

A named budget's state is a row of ``solidq_rate_limits`` whose key is exactly its name, so it
holds across processes and machines, as a job's budget does. Its declaration lives in code,
process-wide like the job registry: every process that uses the budget registers it at
import, with the same figures. Here only the registry; the declaration
(:class:`~flask_solidq.controls.rate_limit.RateLimit`) and its checks are ``limits_rate``'s.
"""

from __future__ import annotations

import threading
import typing as t

if t.TYPE_CHECKING:
    from flask_solidq.definitions.rate_limits import RateLimit

_budgets: dict[str, RateLimit] = {}
_lock = threading.Lock()


def add(limit: RateLimit) -> None:
    """Register ``limit`` under its budget name; again with the same figures does nothing.

    :raises ValueError: the name is registered already with other figures.
    """
    name = t.cast(str, limit.budget)
    with _lock:
        existing = _budgets.setdefault(name, limit)
    if existing.figures != limit.figures:
        raise ValueError(
            f"The budget {name!r} is registered already with {existing.describe_figures()};"
            f" registering it again with {limit.describe_figures()} would give its jobs and its"
            " callers two limits. Register it once, in a module every process imports."
        )


def find(name: str) -> RateLimit | None:
    """The budget registered as ``name``, or None."""
    return _budgets.get(name)


def required(name: str, *, by: str) -> RateLimit:
    """The budget registered as ``name``.

    :param by: who asks for it, for the message (``"limits_rate(budget='stripe')"``).
    :raises ValueError: none is registered in this process.
    """
    limit = _budgets.get(name)
    if limit is None:
        raise ValueError(
            f"{by}: no budget named {name!r} is registered in this process. Call"
            f" solidq.rate_limiter.register({name!r}, to=..., per=...) at import, in a module"
            " the job's module imports, so every process that has the job has the budget."
        )
    return limit


def names() -> list[str]:
    """The registered budgets' names, sorted."""
    return sorted(_budgets)


def unregister(name: str) -> None:
    """Forget the budget ``name`` (for tests that register budgets on the fly)."""
    with _lock:
        _budgets.pop(name, None)
