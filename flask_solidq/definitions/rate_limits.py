"""``RateLimit``: what a ``limits_rate`` declaration (or a named budget) holds, as plain data
a job class keeps (:mod:`flask_solidq.definitions.declared`), with the keys, costs and words
it gives; the decorator and what enforces it are :mod:`flask_solidq.controls.rate_limit`'s."""

from __future__ import annotations

import dataclasses
import typing as t

from flask_solidq import keys
from flask_solidq.formatting import count_of
from flask_solidq.formatting import format_duration
from flask_solidq.values import JobArgument


@dataclasses.dataclass(frozen=True)
class RateLimit(keys.Keyed):
    """A validated ``limits_rate`` declaration."""

    to: int
    per: float
    burst: int
    key: keys.KeyDeclaration
    group: keys.KeyDeclaration
    #: Which of a job's stacked limits this is (None for the one without a name): its budgets
    #: are ``"<group or job name>/<name>/<key>"``.
    name: str | None = None
    #: The units one call charges: an int, or a callable of the job's arguments giving one.
    cost: int | t.Callable[..., int] = 1
    #: The named budget it charges (``limits_rate(budget=)``; a registration's own): its key is
    #: exactly this name, and its figures are the registration's. None for a job's own limit.
    budget: str | None = None

    @property
    def figures(self) -> tuple[int, float, int]:
        """``to``, ``per`` and ``burst``: what two registrations of one budget must agree on."""
        return (self.to, self.per, self.burst)

    @property
    def counts_units(self) -> bool:
        """Whether a call may charge more than one unit (``cost=`` was declared)."""
        return callable(self.cost) or self.cost != 1

    @property
    def interval(self) -> float:
        """Seconds between admissions once the burst is spent: ``per / (to - burst + 1)``."""
        return self.per / (self.to - self.burst + 1)

    def stored_key(
        self, job_name: str, args: tuple[JobArgument, ...], kwargs: dict[str, JobArgument]
    ) -> str:
        """The ``solidq_jobs.rate_limit_key`` of a call: a blank key is stored as ``""`` (the
        job is not limited), apart from None, which a job stored before its definition
        declared the limit holds (it uses the bare budget: see ``rate_charges.of``).

        :raises ValueError: the key is longer than its column takes.
        """
        key = self.key_for(job_name, args, kwargs)
        keys.check_length(key, job_name, "rate-limit key")
        return t.cast(str, key)  # the control is on: key_for gives a str

    def key_for(
        self, job_name: str, args: tuple[JobArgument, ...], kwargs: dict[str, JobArgument]
    ) -> str | None:
        """As :meth:`keys.Keyed.key_for`, with a named limit's name after the group or job
        name (so a group's named budgets are shared by name too)."""
        if not self.enabled:
            return None
        if self.budget is not None:
            return self.budget
        scope = keys.scope(self.group, job_name, args, kwargs)
        if self.name is not None:
            scope = self.name if scope is None else f"{scope}/{self.name}"
        return keys.build(scope, self.key, args, kwargs)

    def units_for(
        self, job_name: str, args: tuple[JobArgument, ...], kwargs: dict[str, JobArgument]
    ) -> int:
        """The units a call with these arguments charges (:attr:`cost`).

        :raises ValueError: the cost is below 1, or above the burst (no budget could ever
            admit it: the enqueue fails instead of the job waiting forever).
        :raises TypeError: a cost callable returned something other than an int.
        """
        units = self.cost(*args, **kwargs) if callable(self.cost) else self.cost
        if isinstance(units, bool) or not isinstance(units, int):
            raise TypeError(
                f"{job_name}'s limits_rate(cost=) must give an int, not {type(units).__name__}."
            )
        if not 1 <= units <= self.burst:
            raise ValueError(
                f"{job_name}'s call costs {units} units under limits_rate({self.describe()}),"
                f" which admits 1 to burst={self.burst} units at once: raise burst= (up to"
                f" to=) or split the call."
            )
        return units

    def describe(self) -> str:
        """The declaration's options, as written."""
        name = f", name={self.name!r}" if self.name is not None else ""
        if self.budget is not None:
            return f"budget={self.budget!r}{name}"
        return f"{self.describe_figures()}{name}"

    def describe_figures(self) -> str:
        """``to``, ``per`` and ``burst``, as written."""
        return f"to={self.to}, per={self.per:g}, burst={self.burst}"

    def in_words(self) -> str:
        """A rate limit as a person says it: ``10 per 1m00s, burst 5``; a limit counted in units
        says so (``100 units per 1m00s, burst 100``: claims alone would read ten times too few),
        and a stacked limit's name comes first (``daily: 3 per 1d00h``), so the rows of one job's
        budgets tell their limits apart."""
        per = format_duration(self.per) if self.per >= 1 else f"{self.per:g}s"
        burst = f", burst {self.burst}" if self.burst > 1 else ""
        to = count_of(self.to, self.counts_units)
        named = f"{self.name}: " if self.name is not None else ""
        return f"{named}{to} per {per}{burst}"
