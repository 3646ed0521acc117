"""A :class:`Slot`: a function a module calls that a layer above it provides, filled as that
layer is imported. Where two parts call each other (a job definition hands a job to the
adapters, which run the operations, which load job definitions), the lower one declares a slot
and the upper one fills it, so the imports only ever point down and the call is still plain.
Importing ``flask_solidq`` imports every filler; a slot called before it was filled raises
instead of doing nothing."""

from __future__ import annotations

import typing as t

F = t.TypeVar("F", bound=t.Callable[..., object])


class Slot(t.Generic[F]):
    """A function of type ``F``, provided by the module named in ``filled_by``."""

    __slots__ = ("_function", "filled_by")

    def __init__(self, filled_by: str) -> None:
        self.filled_by = filled_by
        self._function: F | None = None

    def fill(self, function: F) -> None:
        """Make ``function`` what the slot calls."""
        self._function = function

    @property
    def call(self) -> F:
        """The function the slot was filled with.

        :raises RuntimeError: nothing filled it: its module was never imported.
        """
        function = self._function
        if function is None:
            raise RuntimeError(f"{self.filled_by} was never imported, so nothing filled this slot")
        return function


class Hook(t.Generic[F]):
    """A function a module calls around something it does when an optional feature above it
    provided one, and skips otherwise: ``function`` is None until the feature's module fills
    it (tracing, once OpenTelemetry is found), so a caller pays one attribute read without
    it."""

    __slots__ = ("filled_by", "function")

    def __init__(self, filled_by: str) -> None:
        self.filled_by = filled_by
        #: What the hook calls; None while the feature is off.
        self.function: F | None = None

    def fill(self, function: F) -> None:
        """Make ``function`` what the hook calls."""
        self.function = function
