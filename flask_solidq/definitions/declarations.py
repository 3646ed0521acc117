"""How a control decorator attaches its declaration to a job definition.

A control decorator (``limits_rate``, ``coalesce``, ``retry_on``...) validates its options at
once, then either applies its declaration to a job class, or, on a plain function that
``@solidq.job`` will wrap later, records it on the function for ``@solidq.job`` to apply. So the
decorators stack in any order, above or below ``@solidq.job``, and on ``Job`` subclasses.
Applying one replaces the class's declarations object (:mod:`flask_solidq.definitions.declared`).
"""

from __future__ import annotations

import typing as t

from flask_solidq.definitions.declared import DeclaredAttributes

#: Applies one declaration to a job class; raises ValueError when it conflicts with another.
Apply = t.Callable[[type[DeclaredAttributes]], None]

#: What a control decorator decorates (a function or a job class), which it returns as it was:
#: its return type is ``Callable[[Target], Target]``, so type checkers keep the signature.
Target = t.TypeVar("Target")

PENDING_ATTRIBUTE = "__solidq_declarations__"


def declare(target: Target, apply: Apply, *, decorator: str) -> Target:
    """Apply ``apply`` to ``target`` now if it is a job class, or record it on a function.

    :param decorator: the decorator's name, for the error message.
    :raises TypeError: ``target`` is neither a job class nor a function.
    """
    if isinstance(target, type):
        if not issubclass(target, DeclaredAttributes):
            raise TypeError(
                f"@{decorator} goes on a flask_solidq.Job subclass or on a function decorated"
                f" with @solidq.job, not on the class {target.__qualname__}."
            )
        apply(target)
        return target
    if callable(target):
        pending = target.__dict__.setdefault(PENDING_ATTRIBUTE, [])
        pending.append(apply)
        return target
    raise TypeError(f"@{decorator} decorates a job function or a Job subclass, not {target!r}.")


def apply_pending(function: object, job_class: type[DeclaredAttributes]) -> None:
    """Apply the declarations recorded on ``function`` to its new job class, in the order the
    decorators ran (innermost first), as they would have run on a class."""
    for apply in getattr(function, "__dict__", {}).get(PENDING_ATTRIBUTE, []):
        apply(job_class)
