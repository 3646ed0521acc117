"""``@solidq.job``: a job definition made from a plain function.

The decorator returns a :class:`~flask_solidq.Job` subclass made for the function, so both
forms share one API (``perform_later``, ``set``, ``new``, the controls' read-back attributes)
and signals have one kind of sender. Calling it calls the function, as if undecorated::

    @solidq.job
    def reindex_product(product_id): ...

    reindex_product(42)                 # runs the function here
    reindex_product.perform_later(42)   # enqueues it
"""

from __future__ import annotations

import inspect
import typing as t

from flask_solidq.definitions import declarations
from flask_solidq.definitions.calls import Call
from flask_solidq.definitions.job import Job


class _FunctionJobType(type):
    """The metaclass of function jobs: calling the class calls the function."""

    def __call__(cls, *args: t.Any, **kwargs: t.Any) -> t.Any:
        return cls.function(*args, **kwargs)  # type: ignore[attr-defined]


class FunctionJob(Job, metaclass=_FunctionJobType, abstract=True):
    """The base of the job definitions ``@solidq.job`` makes; ``function`` does the work."""

    function: t.ClassVar[t.Callable[..., t.Any]]

    def perform(self, *args: t.Any, **kwargs: t.Any) -> t.Any:
        return type(self).function(*args, **kwargs)

    def perform_calls(self, calls: list[Call]) -> t.Any:
        return type(self).function(calls)

    @classmethod
    def _performer(cls) -> t.Callable[..., t.Any]:
        """The function: its signature, not ``perform``'s catch-all, is what the arguments of an
        enqueue must fit."""
        return cls.function

    @classmethod
    def _read_signature(cls, performer: t.Callable[..., t.Any]) -> inspect.Signature | None:
        try:
            return inspect.signature(performer)
        except (TypeError, ValueError):  # a builtin: its arguments aren't checked
            return None


def make_job(
    function: t.Callable[..., t.Any],
    *,
    name: str | None = None,
    queue: str = "default",
    priority: int = 0,
) -> type[FunctionJob]:
    """Make the job definition for ``function``, with the controls decorated on it.

    :raises ValueError: another job already has this name, or the controls conflict.
    :raises TypeError: ``function`` isn't callable, or an option has the wrong type.
    """
    if not callable(function) or isinstance(function, type):
        raise TypeError(f"@solidq.job decorates a function, not {function!r}.")
    namespace = {
        "function": staticmethod(function),
        "queue_name": queue,
        "priority": priority,
        "__module__": function.__module__,
        "__qualname__": function.__qualname__,
        "__doc__": function.__doc__,
        "__wrapped__": function,
    }
    job_class = _FunctionJobType(
        function.__name__,
        (FunctionJob,),
        namespace,
        name=function.__qualname__ if name is None else name,
    )
    declarations.apply_pending(function, job_class)
    return t.cast("type[FunctionJob]", job_class)
