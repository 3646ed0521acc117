"""``Definition.set(...)`` on a job definition's class: the enqueue options it takes
(:class:`EnqueueOptions`), checked at once, and the :class:`ConfiguredJob` it returns, which
makes the definition's jobs with those options.
"""

from __future__ import annotations

import datetime as dt
import typing as t

from flask_solidq.definitions.job_methods import JobT
from flask_solidq.definitions.job_methods import P
from flask_solidq.definitions.job_methods import R


class EnqueueOptions(t.TypedDict):
    """The options ``set`` takes, None for one not given."""

    wait: dt.timedelta | float | None
    wait_until: dt.datetime | None
    queue: str | None
    priority: int | None


# Any as the return type: what a class job's ``perform`` returns is not part of its type, so
# ``perform_now`` gives it back as Any (see job_methods.PerformNow).
def set_on_class(
    cls: type[JobT],
    *,
    wait: dt.timedelta | float | None = None,
    wait_until: dt.datetime | None = None,
    queue: str | None = None,
    priority: int | None = None,
) -> ConfiguredJob[..., JobT, t.Any]:
    """Enqueue options: ``wait=`` (seconds or a timedelta) or ``wait_until=`` (a datetime;
    naive means UTC), ``queue=``, ``priority=``. On the class it returns an object with
    ``perform_later``, ``perform_now`` and ``new``; on a job it sets them and returns the
    job."""
    options = EnqueueOptions(wait=wait, wait_until=wait_until, queue=queue, priority=priority)
    cls.new().set(**options)  # validate now, not at the first enqueue
    return ConfiguredJob(cls, options)


class ConfiguredJob(t.Generic[P, JobT, R]):
    """A job definition with enqueue options, from ``Definition.set(...)``: it takes the
    definition's arguments (``P``), makes its jobs (``JobT``) and returns what it returns
    (``R``)."""

    def __init__(self, job_class: type[JobT], options: EnqueueOptions) -> None:
        self.job_class = job_class
        self.options = options

    def new(self, *args: P.args, **kwargs: P.kwargs) -> JobT:
        """A job with these arguments and the options."""
        return self.job_class.new(*args, **kwargs).set(**self.options)

    def perform_later(self, *args: P.args, **kwargs: P.kwargs) -> JobT:
        """Enqueue a job with these arguments and the options; see ``Job.perform_later``."""
        return self.new(*args, **kwargs).perform_later()

    def perform_now(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Perform a job with these arguments now; see ``Job.perform_now``."""
        # R is what the definition's work returns; a job of JobT only knows it as Any.
        return t.cast(R, self.new(*args, **kwargs).perform_now())
