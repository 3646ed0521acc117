"""``limits_concurrency``: at most ``to`` jobs of one key run at a time.

The declaration is stored on the job class; the key is computed once at enqueue and stored in
``solidq_jobs.concurrency_key``. The semaphore mechanics (acquire when a job becomes ready,
block or discard when full, release after the job's outcome) plug into the operations' hook
points.
"""

from __future__ import annotations

import datetime as dt
import logging
import typing as t

from flask_solidq import keys
from flask_solidq.definitions import declarations
from flask_solidq.definitions import declared
from flask_solidq.definitions import options
from flask_solidq.definitions.concurrency_limits import DEFAULT_DURATION
from flask_solidq.definitions.concurrency_limits import ConcurrencyLimit
from flask_solidq.definitions.concurrency_limits import OnConflict
from flask_solidq.definitions.declarations import Target
from flask_solidq.definitions.declared import DeclaredAttributes

logger = logging.getLogger("flask_solidq")


def limits_concurrency(
    *,
    key: keys.KeyDeclaration,
    to: int = 1,
    duration: dt.timedelta | float = DEFAULT_DURATION,
    group: keys.KeyDeclaration = None,
    on_conflict: str = "block",
) -> t.Callable[[Target], Target]:
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

    def apply(job_class: type[DeclaredAttributes]) -> None:
        if declared.declares_own(job_class, "concurrency_limit"):
            raise ValueError(f"{job_class.__qualname__} declares limits_concurrency twice.")
        declared.declare_on(job_class, "concurrency_limit", concurrency_limit=declaration)
        check_combinations(job_class)

    return lambda target: declarations.declare(target, apply, decorator=name)


def check_combinations(job_class: type[DeclaredAttributes]) -> None:
    """Refuse declarations that can't work together, whichever was written first.

    A ``discard`` concurrency limit would destroy a job that comes back from waiting on its
    rate limit, or one holding replaced arguments or collected calls.
    """
    limit = job_class._concurrency_limit
    if limit is None or limit.on_conflict is not OnConflict.DISCARD:
        return
    name = job_class.__qualname__
    if job_class.rate_limited:
        raise ValueError(
            f"{name}: limits_concurrency(on_conflict='discard') can't be combined with"
            " limits_rate: a job that comes back from waiting on its rate limit to a taken slot"
            " would be discarded. Use on_conflict='block'."
        )
    coalesce = job_class._coalesce
    if coalesce is not None and coalesce.on_conflict in ("replace", "collect"):
        raise ValueError(
            f"{name}: coalesce(on_conflict={coalesce.on_conflict.value!r}) can't be combined with"
            " limits_concurrency(on_conflict='discard'): a conflict would destroy a job holding"
            " replaced arguments or collected calls. Use on_conflict='block'."
        )
