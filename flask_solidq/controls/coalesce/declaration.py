"""``coalesce``: repeated enqueues with one key share one pending job.

``"discard"`` keeps the first call's arguments, ``"replace"`` the latest's, ``"collect"`` every
call's (the job receives them as ``calls``). ``debounce`` pushes a pending job back with each
call, at most ``max_wait`` past its opening. Here: the declaration and its validation.

The control itself, with its ENQUEUE and START hooks, is
:mod:`~flask_solidq.controls.coalesce.control`; its timing rules are in
:mod:`~flask_solidq.controls.coalesce.coalesce_timing`.
"""

from __future__ import annotations

import datetime as dt
import typing as t

from flask_solidq import keys
from flask_solidq.controls.concurrency import declaration as concurrency
from flask_solidq.definitions import declarations
from flask_solidq.definitions import declared
from flask_solidq.definitions import options
from flask_solidq.definitions.coalescing import DEFAULT_MAX_CALLS
from flask_solidq.definitions.coalescing import Coalesce
from flask_solidq.definitions.coalescing import OnConflict
from flask_solidq.definitions.coalescing import OnFull
from flask_solidq.definitions.declarations import Target
from flask_solidq.definitions.declared import DeclaredAttributes


def coalesce(
    *,
    key: keys.KeyDeclaration,
    on_conflict: str = "discard",
    max_calls: int | None = None,
    on_full: str | None = None,
    debounce: dt.timedelta | float | None = None,
    max_wait: dt.timedelta | float | None = None,
) -> t.Callable[[Target], Target]:
    """Merge enqueues with the same key into one pending job.

    :param key: which calls belong together: a ``str`` literal, a callable over the job's
        arguments, or ``None``/``False`` to turn coalescing off.
    :param on_conflict: ``"discard"`` (the pending job keeps its arguments), ``"replace"`` (it
        takes the latest call's) or ``"collect"`` (it receives every call).
    :param max_calls: ``"collect"`` only: the most calls one job takes (100).
    :param on_full: ``"collect"`` only: ``"wait"`` (default) or ``"dispatch"`` a full job at once.
    :param debounce: each call pushes the pending job back to this long from now.
    :param max_wait: with ``debounce``: the latest a job runs after it opened; more than
        ``debounce``.
    :raises ValueError, TypeError: an option is invalid.
    """
    name = "coalesce"
    mode = OnConflict(
        options.choice(
            on_conflict, [m.value for m in OnConflict], option="on_conflict", decorator=name
        )
    )
    collecting = mode is OnConflict.COLLECT
    if not collecting and max_calls is not None:
        raise ValueError("coalesce(max_calls=) is only allowed with on_conflict='collect'.")
    if not collecting and on_full is not None:
        raise ValueError("coalesce(on_full=) is only allowed with on_conflict='collect'.")
    if max_wait is not None and debounce is None:
        raise ValueError("coalesce(max_wait=) needs debounce=.")
    debounce_seconds = (
        None
        if debounce is None
        else options.positive_seconds(debounce, option="debounce", decorator=name)
    )
    max_wait_seconds = (
        None
        if max_wait is None
        else options.positive_seconds(max_wait, option="max_wait", decorator=name)
    )
    if (
        max_wait_seconds is not None
        and debounce_seconds is not None
        and max_wait_seconds <= debounce_seconds
    ):
        raise ValueError(
            f"coalesce(max_wait=) must be longer than debounce= ({debounce_seconds:g}s), "
            f"not {max_wait_seconds:g}s."
        )
    declaration = Coalesce(
        key=key,
        on_conflict=mode,
        max_calls=(
            options.positive_int(
                DEFAULT_MAX_CALLS if max_calls is None else max_calls,
                option="max_calls",
                decorator=name,
            )
            if collecting
            else None
        ),
        on_full=(
            OnFull(
                options.choice(
                    "wait" if on_full is None else on_full,
                    [m.value for m in OnFull],
                    option="on_full",
                    decorator=name,
                )
            )
            if collecting
            else None
        ),
        debounce=debounce_seconds,
        max_wait=max_wait_seconds,
    )

    def apply(job_class: type[DeclaredAttributes]) -> None:
        if declared.declares_own(job_class, "coalesce"):
            raise ValueError(f"{job_class.__qualname__} declares coalesce twice.")
        declared.declare_on(job_class, "coalesce", coalesce=declaration)
        concurrency.check_combinations(job_class)

    return lambda target: declarations.declare(target, apply, decorator=name)
