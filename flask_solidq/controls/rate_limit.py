"""``limits_rate``: workers claim no more of a key's jobs in any ``per`` than ``to``.

The limit is checked inside the claim transaction (GCRA on one budget row per key); a job
over it waits as a scheduled job with a staggered slot instead of holding a worker thread.
Here: the declaration, and the key computed at enqueue into ``solidq_jobs.rate_limit_key``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

from flask_solidq import keys
from flask_solidq.controls import concurrency
from flask_solidq.controls import options
from flask_solidq.controls.base import Control
from flask_solidq.definitions import declarations

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job

#: The shortest interval between admissions a limit may declare, in seconds.
MIN_INTERVAL = 0.001


@dataclasses.dataclass(frozen=True)
class RateLimit(keys.Keyed):
    """A validated ``limits_rate`` declaration."""

    to: int
    per: float
    burst: int
    key: keys.KeyDeclaration
    group: keys.KeyDeclaration

    @property
    def interval(self) -> float:
        """Seconds between admissions once the burst is spent: ``per / (to - burst + 1)``."""
        return self.per / (self.to - self.burst + 1)


def limits_rate(
    *,
    to: int,
    per: dt.timedelta | float,
    key: keys.KeyDeclaration,
    burst: int = 1,
    group: keys.KeyDeclaration = None,
) -> t.Callable[[t.Any], t.Any]:
    """Admit at most ``to`` claims of the jobs sharing a budget in any window of ``per``.

    A quiet budget admits ``burst`` jobs at once, then one every ``per / (to - burst + 1)``.

    :param to: the most claims any ``per`` admits.
    :param per: the window, a timedelta or seconds.
    :param key: which jobs share a budget: a ``str`` literal (``"global"``), a callable over the
        job's arguments, or ``None``/``False`` to turn the limit off.
    :param burst: how many a quiet budget admits at once, 1 to ``to``.
    :param group: share budgets with other job definitions naming the same group.
    :raises ValueError, TypeError: an option is invalid.
    """
    name = "limits_rate"
    declaration = RateLimit(
        to=options.positive_int(to, option="to", decorator=name),
        per=options.positive_seconds(per, option="per", decorator=name),
        burst=options.positive_int(burst, option="burst", decorator=name),
        key=key,
        group=group,
    )
    if declaration.burst > declaration.to:
        raise ValueError(f"limits_rate(burst=) must be at most to={to}, not {burst}.")
    if declaration.interval < MIN_INTERVAL:
        raise ValueError(
            f"limits_rate admits one job every per / (to - burst + 1) = {declaration.interval:g}s,"
            f" which must be at least {MIN_INTERVAL}s; lower to= or raise per=."
        )

    def apply(job_class: type) -> None:
        if declarations.declares_own(job_class, "_rate_limit"):
            raise ValueError(
                f"{job_class.__qualname__} declares limits_rate twice; a job has one rate limit."
            )
        enabled = declaration.enabled
        job_class._rate_limit = declaration if enabled else None  # type: ignore[attr-defined]
        job_class.rate_limit_to = declaration.to if enabled else None  # type: ignore[attr-defined]
        job_class.rate_limit_per = declaration.per if enabled else None  # type: ignore[attr-defined]
        job_class.rate_limit_burst = declaration.burst if enabled else None  # type: ignore[attr-defined]
        job_class.rate_limit_key = declaration.key  # type: ignore[attr-defined]
        job_class.rate_limit_group = declaration.group  # type: ignore[attr-defined]
        job_class.rate_limited = enabled  # type: ignore[attr-defined]
        concurrency.check_combinations(job_class)

    return lambda target: declarations.declare(target, apply, decorator=name)


class RateLimitControl(Control):
    """The hooks of ``limits_rate``."""

    def stamp(self, job: Job, row: dict[str, t.Any]) -> None:
        row["rate_limit_key"] = type(job).rate_limit_key_for(*job.arguments, **job.kwargs)


CONTROL = RateLimitControl()
