"""The methods of a job definition that work on the class and on a job (``perform_later``,
``perform_now``, ``set``): one implementation for each, chosen by a descriptor, with the
overloads type checkers read for a class job. A function job narrows them to its function's
parameters (:mod:`flask_solidq.definitions.function_job`)."""

from __future__ import annotations

import datetime as dt
import types
import typing as t

if t.TYPE_CHECKING:
    from flask_solidq.definitions.configured_job import ConfiguredJob

#: A job: the descriptors sit on ``Job``, whose instances they are bound to.
JobT = t.TypeVar("JobT")
T_co = t.TypeVar("T_co", covariant=True)


class ClassOrInstanceMethod:
    """A method with one implementation for the class and one for an instance."""

    def __init__(
        self, on_class: t.Callable[..., object], on_instance: t.Callable[..., object]
    ) -> None:
        self.on_class = on_class
        self.on_instance = on_instance
        self.__doc__ = on_class.__doc__

    def __get__(self, instance: object | None, owner: type) -> object:
        if instance is None:
            return types.MethodType(self.on_class, owner)
        return types.MethodType(self.on_instance, instance)


# The three methods that work on the class and on a job, as type checkers see them: on a class
# job's class they take any arguments (a class job's are checked at the enqueue, against
# ``perform``); on a job, none. The overloads are declared for type checkers only: at run time
# ``ClassOrInstanceMethod.__get__`` does the work, so an enqueue pays no extra call.


class PerformLater(ClassOrInstanceMethod):
    """``perform_later``: returns the job."""

    if t.TYPE_CHECKING:

        @t.overload
        def __get__(self, instance: None, owner: type[JobT]) -> t.Callable[..., JobT]: ...
        @t.overload
        def __get__(self, instance: JobT, owner: type) -> t.Callable[[], JobT]: ...
        def __get__(self, instance: object | None, owner: type) -> object: ...


class PerformNow(ClassOrInstanceMethod):
    """``perform_now``: returns what the job's work returns."""

    if t.TYPE_CHECKING:
        # Any: what a class job's ``perform`` returns isn't part of the definition's type,
        # and the caller, who knows it, should be able to use it without a cast.
        @t.overload
        def __get__(self, instance: None, owner: type) -> t.Callable[..., t.Any]: ...
        @t.overload
        def __get__(self, instance: object, owner: type) -> t.Callable[[], t.Any]: ...
        def __get__(self, instance: object | None, owner: type) -> object: ...


class SetOptions(t.Protocol[T_co]):
    """``set``'s signature: the enqueue options, returning ``T_co``."""

    def __call__(
        self,
        *,
        wait: dt.timedelta | float | None = None,
        wait_until: dt.datetime | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> T_co: ...


class Set(ClassOrInstanceMethod):
    """``set``: on the class, a :class:`ConfiguredJob`; on a job, the job."""

    if t.TYPE_CHECKING:

        @t.overload
        def __get__(  # Any: as for PerformNow
            self, instance: None, owner: type[JobT]
        ) -> SetOptions[ConfiguredJob[..., JobT, t.Any]]: ...
        @t.overload
        def __get__(self, instance: JobT, owner: type) -> SetOptions[JobT]: ...
        def __get__(self, instance: object | None, owner: type) -> object: ...
