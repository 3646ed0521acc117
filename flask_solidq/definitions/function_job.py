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

import dataclasses
import inspect
import typing as t

from flask_solidq.definitions import declarations
from flask_solidq.definitions import step_options
from flask_solidq.definitions.calls import Call
from flask_solidq.definitions.job import Job

if t.TYPE_CHECKING:
    from flask_solidq.definitions.configured_job import ConfiguredJob
    from flask_solidq.definitions.job_methods import PerformLater
    from flask_solidq.definitions.job_methods import PerformNow
    from flask_solidq.definitions.job_methods import Set
    from flask_solidq.definitions.job_methods import SetOptions

P = t.ParamSpec("P")
R = t.TypeVar("R")


class _FunctionJobType(type):
    """The metaclass of function jobs: calling the class calls the function."""

    if t.TYPE_CHECKING:
        # Each class made with it has one (FunctionJob.function).
        function: t.Callable[..., object]

    def __call__(cls, *args: object, **kwargs: object) -> object:
        return cls.function(*args, **kwargs)


class FunctionJob(Job, t.Generic[P, R], metaclass=_FunctionJobType, abstract=True):
    """The base of the job definitions ``@solidq.job`` makes; ``function`` does the work.

    For type checkers a definition is ``type[FunctionJob[P, R]]``: the function's parameters
    ``P`` and return type ``R``, which calling it, ``new``, ``perform_later``, ``perform_now``
    and ``set(...)`` carry (see the descriptors in :mod:`flask_solidq.definitions.job`).
    """

    function: t.ClassVar[t.Callable[..., object]]

    if t.TYPE_CHECKING:
        # Calling the class calls the function (_FunctionJobType.__call__), but mypy reads what
        # calling a class does from its __new__, never from its metaclass's __call__; so this
        # __new__, declared for type checkers only, states the function's signature. mypy
        # wants a __new__ to return an instance: here it returns what the function does.
        def __new__(cls, *args: P.args, **kwargs: P.kwargs) -> R:  # type: ignore[misc]
            ...

        @classmethod
        def new(cls, *args: P.args, **kwargs: P.kwargs) -> FunctionJob[P, R]: ...

        # Job's own methods, which on a function job take the function's parameters and
        # return what it returns (the descriptors below).
        perform_later: _PerformLater
        perform_now: _PerformNow
        set: _Set

    def perform(self, *args: object, **kwargs: object) -> object:
        return type(self).function(*args, **kwargs)

    def perform_calls(self, calls: list[Call]) -> object:
        return type(self).function(calls)

    @classmethod
    def _performer(cls) -> t.Callable[..., object]:
        """The function: its signature, not ``perform``'s catch-all, is what the arguments of an
        enqueue must fit."""
        return cls.function

    @classmethod
    def _read_signature(cls, performer: t.Callable[..., object]) -> inspect.Signature | None:
        try:
            return inspect.signature(performer)
        except (TypeError, ValueError):  # a builtin: its arguments aren't checked
            return None


if t.TYPE_CHECKING:
    # ``perform_later``, ``perform_now`` and ``set`` as type checkers see them on a function
    # job (``FunctionJob[P, R]``): on its class they take the function's parameters ``P`` and
    # carry its return type ``R``; on a job, none. At run time they are Job's. They narrow
    # Job's overloads to the one owner they sit on, a function job, hence the ignore: mypy
    # wants an override to take every owner the overridden one takes.

    class _PerformLater(PerformLater):
        @t.overload  # type: ignore[override]
        def __get__(
            self, instance: None, owner: type[FunctionJob[P, R]]
        ) -> t.Callable[P, FunctionJob[P, R]]: ...
        @t.overload
        def __get__(
            self, instance: FunctionJob[P, R], owner: type
        ) -> t.Callable[[], FunctionJob[P, R]]: ...
        def __get__(self, instance: Job | None, owner: type) -> object: ...

    class _PerformNow(PerformNow):
        @t.overload  # type: ignore[override]
        def __get__(self, instance: None, owner: type[FunctionJob[P, R]]) -> t.Callable[P, R]: ...
        @t.overload
        def __get__(self, instance: FunctionJob[P, R], owner: type) -> t.Callable[[], R]: ...
        def __get__(self, instance: Job | None, owner: type) -> object: ...

    class _Set(Set):
        @t.overload  # type: ignore[override]
        def __get__(
            self, instance: None, owner: type[FunctionJob[P, R]]
        ) -> SetOptions[ConfiguredJob[P, FunctionJob[P, R], R]]: ...
        @t.overload
        def __get__(
            self, instance: FunctionJob[P, R], owner: type
        ) -> SetOptions[FunctionJob[P, R]]: ...
        def __get__(self, instance: Job | None, owner: type) -> object: ...


@dataclasses.dataclass(frozen=True)
class JobDecorator:
    """``@solidq.job`` with its options: makes the job definition of the function it decorates.

    For type checkers the definition keeps the function's parameters and return type. A
    function that takes one list of calls is typed as a collecting job's
    (``coalesce(on_conflict="collect")``): its ``perform_later`` takes each call's own
    arguments, which the function's signature doesn't say, so any are let through.
    """

    queue: str = "default"
    priority: int = 0
    name: str | None = None
    #: See :class:`~flask_solidq.definitions.steps.Resumable`.
    max_resumptions: int | None | step_options.Default = step_options.Default.CONFIG
    #: See :class:`~flask_solidq.definitions.steps.Resumable`.
    resume_errors: tuple[type[Exception], ...] = ()

    @t.overload
    def __call__(self, function: t.Callable[[list[Call]], R]) -> type[FunctionJob[..., R]]: ...
    @t.overload
    def __call__(self, function: t.Callable[P, R]) -> type[FunctionJob[P, R]]: ...
    # Any: the implementation must produce each overload's FunctionJob[P, R], invariant in R.
    def __call__(self, function: t.Callable[..., object]) -> type[FunctionJob[..., t.Any]]:
        return make_job(
            function,
            name=self.name,
            queue=self.queue,
            priority=self.priority,
            max_resumptions=self.max_resumptions,
            resume_errors=self.resume_errors,
        )


def make_job(
    function: t.Callable[..., object],
    *,
    name: str | None = None,
    queue: str = "default",
    priority: int = 0,
    max_resumptions: int | None | step_options.Default = step_options.Default.CONFIG,
    resume_errors: tuple[type[Exception], ...] = (),
) -> type[FunctionJob[..., object]]:
    """Make the job definition for ``function``, with the controls decorated on it.

    :raises ValueError: another job already has this name, or the controls conflict.
    :raises TypeError: ``function`` isn't callable, or an option has the wrong type.
    """
    if not callable(function) or isinstance(function, type):
        raise TypeError(f"@solidq.job decorates a function, not {function!r}.")
    step_options.check_resume_errors(resume_errors, where="@solidq.job(resume_errors=)")
    namespace = {
        "function": staticmethod(function),
        "queue_name": queue,
        "priority": priority,
        "__module__": function.__module__,
        "__qualname__": function.__qualname__,
        "__doc__": function.__doc__,
        "__wrapped__": function,
        "resume_errors": resume_errors,
    }
    job_class = t.cast(
        "type[FunctionJob[..., object]]",
        _FunctionJobType(
            function.__name__,
            (FunctionJob,),
            namespace,
            name=function.__qualname__ if name is None else name,
            max_resumptions=max_resumptions,
        ),
    )
    declarations.apply_pending(function, job_class)
    return job_class
