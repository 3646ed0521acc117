"""``limits_concurrency``: at most ``to`` jobs of one key run at a time.

The declaration is stored on the job class; the key is computed once at enqueue and stored in
``solidq_jobs.concurrency_key``. The semaphore mechanics (acquire when a job becomes ready,
block or discard when full, release after the job's outcome) plug into the operations' hook
points.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import typing as t

from flask_solidq import keys
from flask_solidq.controls import options
from flask_solidq.controls.base import Control
from flask_solidq.definitions import declarations

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job

DEFAULT_DURATION = 180.0


class OnConflict(str, enum.Enum):
    """What a job does when its concurrency key has no free slot."""

    #: Wait as a blocked execution until a slot frees.
    BLOCK = "block"
    #: Destroy the job in the enqueue's (or dispatch's) own transaction.
    DISCARD = "discard"


@dataclasses.dataclass(frozen=True)
class ConcurrencyLimit:
    """A validated ``limits_concurrency`` declaration."""

    to: int
    key: keys.KeyDeclaration
    duration: float
    group: keys.KeyDeclaration
    on_conflict: OnConflict

    @property
    def enabled(self) -> bool:
        return not keys.is_disabled(self.key)

    def key_for(
        self, job_name: str, args: tuple[t.Any, ...], kwargs: dict[str, t.Any]
    ) -> str | None:
        """The concurrency key a call with these arguments gets, or None when disabled."""
        if not self.enabled:
            return None
        return keys.build(keys.scope(self.group, job_name, args, kwargs), self.key, args, kwargs)


def limits_concurrency(
    *,
    key: keys.KeyDeclaration,
    to: int = 1,
    duration: dt.timedelta | float = DEFAULT_DURATION,
    group: keys.KeyDeclaration = None,
    on_conflict: str = "block",
) -> t.Callable[[t.Any], t.Any]:
    """Let at most ``to`` jobs with the same key run at once.

    :param key: a ``str`` literal, a callable receiving the job's arguments, or ``None``/``False``
        to turn the limit off (in a subclass, say).
    :param to: how many may run at once.
    :param duration: how long a slot is held at most: a holder that dies without releasing
        frees it when this runs out. Make it comfortably longer than the job's run.
    :param group: share the slots with other job definitions naming the same group; by default
        the job's name.
    :param on_conflict: ``"block"`` waits for a free slot; ``"discard"`` drops the job.
    :raises ValueError, TypeError: an option is invalid.
    """
    name = "limits_concurrency"
    declaration = ConcurrencyLimit(
        to=options.positive_int(to, option="to", decorator=name),
        key=key,
        duration=options.positive_seconds(duration, option="duration", decorator=name),
        group=group,
        on_conflict=OnConflict(
            options.choice(
                on_conflict, [m.value for m in OnConflict], option="on_conflict", decorator=name
            )
        ),
    )

    def apply(job_class: type) -> None:
        if declarations.declares_own(job_class, "_concurrency_limit"):
            raise ValueError(f"{job_class.__qualname__} declares limits_concurrency twice.")
        job_class._concurrency_limit = declaration if declaration.enabled else None  # type: ignore[attr-defined]
        job_class.concurrency_limit = declaration.to if declaration.enabled else None  # type: ignore[attr-defined]
        job_class.concurrency_key = declaration.key  # type: ignore[attr-defined]
        job_class.concurrency_duration = declaration.duration  # type: ignore[attr-defined]
        job_class.concurrency_group = declaration.group  # type: ignore[attr-defined]
        job_class.concurrency_on_conflict = declaration.on_conflict  # type: ignore[attr-defined]
        check_combinations(job_class)

    return lambda target: declarations.declare(target, apply, decorator=name)


def check_combinations(job_class: type) -> None:
    """Refuse declarations that can't work together, whichever was written first.

    A ``discard`` concurrency limit would destroy a job that comes back from waiting on its
    rate limit, or one holding replaced arguments or collected calls.
    """
    limit: ConcurrencyLimit | None = getattr(job_class, "_concurrency_limit", None)
    if limit is None or limit.on_conflict is not OnConflict.DISCARD:
        return
    name = job_class.__qualname__
    if getattr(job_class, "rate_limited", False):
        raise ValueError(
            f"{name}: limits_concurrency(on_conflict='discard') can't be combined with"
            " limits_rate: a job that comes back from waiting on its rate limit to a taken slot"
            " would be discarded. Use on_conflict='block'."
        )
    coalesce = getattr(job_class, "_coalesce", None)
    if coalesce is not None and coalesce.on_conflict in ("replace", "collect"):
        raise ValueError(
            f"{name}: coalesce(on_conflict={coalesce.on_conflict.value!r}) can't be combined with"
            " limits_concurrency(on_conflict='discard'): a conflict would destroy a job holding"
            " replaced arguments or collected calls. Use on_conflict='block'."
        )


class ConcurrencyControl(Control):
    """The hooks of ``limits_concurrency``."""

    def stamp(self, job: Job, row: dict[str, t.Any]) -> None:
        row["concurrency_key"] = type(job).concurrency_key_for(*job.arguments, **job.kwargs)

    def acts_on_dispatch(self, row: dict[str, t.Any]) -> bool:
        return row["concurrency_key"] is not None


CONTROL = ConcurrencyControl()
