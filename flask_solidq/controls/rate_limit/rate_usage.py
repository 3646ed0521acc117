"""``current_job.rate_limit_used(units)``: correct a budget by what a call really used.

A limit counted in units (``limits_rate(cost=)``) charges an estimate at the claim: the tokens
a prompt may take, the points a query may cost. Once the API has answered, the job reports
what it took and the budgets it was charged move by the difference, both ways: a call that
took more leaves the budget owing more (up to its burst, see
:meth:`~flask_solidq.controls.rate_limit.gcra.Budget.correct`), one that took less gives units back
from that moment on. The correction is its own short transaction on the budgets' rows, read on the
database's clock as the claims are.
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa

from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import rate_charges
from flask_solidq.controls.rate_limit.rate_charges import Charge
from flask_solidq.state import get_state
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from flask_solidq.values import ClaimedJob


class Usage:
    """The corrector of one claimed run: it knows what the claim charged, and what the
    corrections so far made of it (a second report corrects from the first, not again from
    the estimate)."""

    def __init__(self, claimed: ClaimedJob) -> None:
        self._claimed = claimed
        self._charges: list[Charge] | None = None

    def __call__(self, used: int, name: str | None = None) -> int:
        """Correct the budgets by ``used`` units; return how many budgets were corrected
        (none without the budgets table).

        Without ``name``: the limits declared with ``cost=``, or every limit when none is.

        :raises ValueError: ``used`` is negative, or the job has no limit named ``name``.
        :raises TypeError: ``used`` isn't an int.
        """
        if isinstance(used, bool) or not isinstance(used, int):
            raise TypeError(f"rate_limit_used() takes an int of units, not {used!r}.")
        if used < 0:
            raise ValueError(f"rate_limit_used() takes the units used, 0 or more, not {used}.")
        if self._charges is None:
            self._charges = rate_charges.of(self._claimed)
        chosen = _chosen(self._charges, name)
        if chosen:
            if not db.retrying_deadlocks(lambda: _correct(chosen, used)):
                return 0
            self._charges = [
                Charge(charge.limit, charge.key, used) if charge in chosen else charge
                for charge in self._charges
            ]
        return len(chosen)


def _chosen(charges: list[Charge], name: str | None) -> list[Charge]:
    if name is not None:
        named = [charge for charge in charges if charge.limit.name == name]
        if not named and not any(charge.limit.name == name for charge in charges):
            names = sorted(repr(charge.limit.name) for charge in charges)
            raise ValueError(
                f"rate_limit_used(name={name!r}): this run was charged by no limit of that"
                f" name (its limits: {', '.join(names) or 'none'})."
            )
        return named
    weighted = [charge for charge in charges if charge.limit.counts_units]
    return weighted or list(charges)


def _correct(charges: list[Charge], used: int) -> bool:
    """Correct the budgets of ``charges``; False when the budgets table is missing (there is
    nothing to correct, and the job goes on: see :mod:`.budget_table`)."""
    engine = get_state().engine
    try:
        with db.write(engine) as connection:
            if budget_table.TABLE.is_missing(connection):
                return False
            states = budgets.lock(connection, (charge.key for charge in charges), utcnow())
            now = database_clock.now(connection)
            for charge in charges:
                states[charge.key].correct(charge.rate, now, used - charge.units)
            budgets.save(connection, states, now)
    except sa.exc.DBAPIError as error:
        if budget_table.TABLE.noticed_missing(engine, error):
            return False
        raise
    return True
