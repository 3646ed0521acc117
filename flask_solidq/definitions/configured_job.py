"""``Definition.set(...)`` on a job definition's class: the enqueue options it takes
(:class:`EnqueueOptions`) and the type of what it returns (:class:`ConfiguredJob`), which makes
the definition's jobs with those options.

The type is a protocol, so that ``set``'s descriptors can name it without naming the job
classes; the job class makes the object (:mod:`flask_solidq.definitions.job`).
"""

from __future__ import annotations

import datetime as dt
import typing as t

P = t.ParamSpec("P")
JobT_co = t.TypeVar("JobT_co", covariant=True)
R_co = t.TypeVar("R_co", covariant=True)


class EnqueueOptions(t.TypedDict):
    """The options ``set`` takes, None for one not given."""

    wait: dt.timedelta | float | None
    wait_until: dt.datetime | None
    queue: str | None
    priority: int | None


class ConfiguredJob(t.Protocol[P, JobT_co, R_co]):
    """A job definition with enqueue options, from ``Definition.set(...)``: it takes the
    definition's arguments (``P``), makes its jobs (``JobT_co``) and returns what it returns
    (``R_co``)."""

    def new(self, *args: P.args, **kwargs: P.kwargs) -> JobT_co:
        """A job with these arguments and the options."""
        ...

    def perform_later(self, *args: P.args, **kwargs: P.kwargs) -> JobT_co:
        """Enqueue a job with these arguments and the options; see ``Job.perform_later``."""
        ...

    def perform_now(self, *args: P.args, **kwargs: P.kwargs) -> R_co:
        """Perform a job with these arguments now; see ``Job.perform_now``."""
        ...
