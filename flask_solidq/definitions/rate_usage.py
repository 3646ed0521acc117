"""What a running job tells its rate limits: :meth:`RateLimitUsage.rate_limit_used`."""

from __future__ import annotations

import typing as t


class RateLimitUsage:
    """The part of a job that reports what its rate-limited call really used."""

    #: Set by the worker that runs the job
    #: (:class:`flask_solidq.controls.rate_limit.rate_usage.Usage`):
    #: corrects the budgets its claim charged. None when no claim charged any (a job
    #: performed now, in the caller's process).
    _rate_limit_usage: t.Callable[[int, str | None], int] | None = None

    def rate_limit_used(self, units: int, *, name: str | None = None) -> int:
        """Correct the budgets this run was charged by what the call really used: ``units``
        instead of the ``cost=`` estimate (more or fewer). Call it again to correct again.

        :param name: the stacked limit to correct; by default those declared with ``cost=``
            (every limit of the job when none is).
        :returns: how many budgets were corrected: 0 when no claim charged this run (the job
            was performed in this process, not by a worker), or the budgets table is missing.
        :raises ValueError: ``units`` is negative, or no limit of the run has ``name``.
        """
        usage = self._rate_limit_usage
        return 0 if usage is None else usage(units, name)
