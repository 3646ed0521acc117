"""How much a budget admits at once now, for the people reading it (the dashboard's budgets
page, ``flask solidq status``, ``solidq.rate_limiter.state``): the GCRA of
:mod:`~flask_solidq.controls.rate_limit.gcra` run forward without charging anything."""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    import datetime as dt

    from flask_solidq.controls.rate_limit import gcra


def admits_available(budget: gcra.Budget, rate: gcra.Rate, now: dt.datetime) -> int:
    """How many claims of one unit ``budget`` would admit at once at ``now``: ``burst`` when
    it is idle, none while its next admission is ahead, and as many intervals as it has
    caught up on in between. For a limit counted in units this is the units available: a
    call of ``u`` units is admitted when ``now >= tat - (burst - u) * T``, exactly when ``u``
    calls of one unit would be. Pure: nothing is charged."""
    available_at = budget.available_at(rate, now)
    if available_at > now:
        return 0
    if budget.tat is None:
        return rate.burst
    # The capped tat, as admit() sees it: admissions start at tat - tolerance.
    tat = min(budget.tat, now + rate.interval * rate.burst)
    caught_up = (now - (tat - rate.tolerance)) // rate.interval
    return min(rate.burst, caught_up + 1)
