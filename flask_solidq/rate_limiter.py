"""``solidq.rate_limiter``: read a rate-limit budget from anywhere in the app, and clear idle
ones.

Queuety's programmatic limiter, over flask-solidq's budgets: ``is_limited(key)`` and
``time_until_available(key)`` answer from the budget's row and the limit its jobs declare,
so they say what the next claim by *any* worker would get, not what one process believes.
(Queuety's ``register()`` has no counterpart: a limit is declared on the job with
``limits_rate``, which is what every worker enforces.)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import database_clock
from flask_solidq import db
from flask_solidq import errors
from flask_solidq.controls import back_off
from flask_solidq.controls import budget_table
from flask_solidq.controls import budgets
from flask_solidq.controls import gcra
from flask_solidq.controls import rate_limit
from flask_solidq.controls.available import admits_available
from flask_solidq.state import get_state
from flask_solidq.timing import utcnow


@dataclasses.dataclass(frozen=True)
class BudgetState:
    """What :meth:`RateLimiter.state` tells of one budget."""

    key: str
    #: When the next claim would be admitted (now, or later while the budget is spent).
    next_admission_at: dt.datetime
    #: Jobs waiting on the budget (deferred by their rate limit, not scheduled with wait=).
    waiting: int
    #: When the first waiting job is looked at again; None with none waiting.
    next_check_at: dt.datetime | None
    #: The last slot handed out to a waiting job; None if none was.
    last_slot_at: dt.datetime | None
    #: How many claims it would admit at once now: units, when :attr:`counts_units`.
    available: int = 0
    #: Whether the limit counts units (``limits_rate(cost=)``) rather than claims.
    counts_units: bool = False
    #: The name of the stacked limit the budget belongs to (``limits_rate(name=)``); None for
    #: a job's limit without a name.
    limit_name: str | None = None
    #: Until when it admits nothing, after an API's 429 (``RateLimited``, :meth:`back_off`);
    #: None when it isn't paused, or the pause is over.
    backed_off_until: dt.datetime | None = None

    @property
    def limited(self) -> bool:
        """Whether a claim now would be deferred (by this host's clock; the figures
        themselves are the database's)."""
        return self.next_admission_at > utcnow()


class RateLimiter:
    """The budgets of the current app's queue. Every method requires an app context, and
    raises :class:`~flask_solidq.PendingMigrations` when the budgets table is missing."""

    def is_limited(self, key: str, units: int = 1) -> bool:
        """True while a claim of a job with this budget key (charging ``units``, under a
        limit counted in units) would be deferred now.

        :raises ValueError: no registered job declares a limit whose budgets include ``key``,
            or ``units`` is outside 1 to the limit's burst.
        """
        return self.time_until_available(key, units=units) > 0

    def time_until_available(self, key: str, units: int = 1) -> float:
        """Seconds until a claim of a job with this budget key is admitted (0.0 if now); with
        ``units``, until a claim of that many units is (a limit counted in units admits a
        large call later than a small one).

        :raises ValueError: no registered job declares a limit whose budgets include ``key``,
            or ``units`` is outside 1 to the limit's burst (no claim of more is ever admitted).
        """
        declaration = _declaration(key)
        _check_units(units, declaration)
        rate = declaration.rate
        with budget_table.required(), db.read(self._engine()) as connection:
            budget = budgets.read(connection, key) or gcra.Budget()
            now = database_clock.now(connection)
        return max(0.0, (budget.available_at(rate, now, units) - now).total_seconds())

    def state(self, key: str) -> BudgetState:
        """The budget of ``key``: next admission, what it admits now, jobs waiting, next
        check, last slot, and its limit's kind (units or claims) and name.

        :raises ValueError: no registered job declares a limit whose budgets include ``key``.
        """
        declaration = _declaration(key)
        rate = declaration.rate
        with budget_table.required(), db.read(self._engine()) as connection:
            budget = budgets.read(connection, key) or gcra.Budget()
            waiting = budgets.waiting(connection, key)
            now = database_clock.now(connection)
        return BudgetState(
            key=key,
            next_admission_at=budget.available_at(rate, now),
            waiting=waiting[0].size if waiting else 0,
            next_check_at=waiting[0].next_check_at if waiting else None,
            last_slot_at=budget.last_slot_at,
            available=admits_available(budget, rate, now),
            counts_units=declaration.counts_units,
            limit_name=declaration.name,
            backed_off_until=(
                budget.backed_off_until
                if budget.backed_off_until is not None and budget.backed_off_until > now
                else None
            ),
        )

    def back_off(self, key: str, seconds: float | dt.timedelta) -> dt.datetime:
        """Pause the budget ``key`` (as stored, ``"sync_shop/acme"``): it admits nothing for
        ``seconds`` (a number above 0 or a ``timedelta``), counted from the database's clock,
        then admits at its rate again (at most its burst at once). A longer pause already
        there is kept. The jobs already waiting on it are refused when their slots come and
        get new ones after the pause, spending no attempt. Sends ``rate_limit_back_off``.
        Return until when the budget is paused (by the database's clock).

        :raises ValueError: no registered job declares a limit whose budgets include
            ``key``, or ``seconds`` isn't above 0.
        :raises TypeError: ``seconds`` is neither a number nor a ``timedelta``.
        """
        pause = t.cast(dt.timedelta, errors.pause_of(seconds, name="back_off(seconds=)"))
        _declaration(key)  # refuses a key no registered limit covers
        engine = self._engine()
        with budget_table.required(), db.write(engine) as connection:
            backed_off = back_off.pause(connection, {key: pause})
            budgets.save(connection, backed_off.locked, backed_off.now)
            until = backed_off.until[key]
            db.after_commit_on(connection, lambda: back_off.announce(None, [key], until))
        return until

    def clear_idle_in_batches(self, batch_size: int = 500, sleep_between_batches: float = 0) -> int:
        """Delete the budgets that admit exactly as a missing one would (full, no slot
        handed out ahead), ``batch_size`` at a time, sleeping ``sleep_between_batches``
        seconds between batches; return how many. It never changes what is admitted.

        :raises ValueError: ``batch_size`` isn't a whole number of 1 or more, or
            ``sleep_between_batches`` isn't a number of 0 or more.
        """
        check_batches(batch_size, sleep_between_batches)
        with budget_table.required():
            return budgets.clear_idle_in_batches(
                self._engine(), batch_size=batch_size, sleep_between_batches=sleep_between_batches
            )

    @staticmethod
    def _engine() -> sa.Engine:
        state = get_state()
        state.check_tables()
        return state.engine


def check_batches(batch_size: object, sleep_between_batches: object) -> None:
    """Refuse batches that would never end (a ``batch_size`` below 1 selects nothing, which
    never looks like the last batch) or a pause ``time.sleep`` refuses, with the fix.

    The housekeeping jobs call this too: their arguments come from ``SOLIDQ_RECURRING``'s
    ``kwargs``, which nothing else checks.

    :raises ValueError: either is out of range or not a number.
    """
    if type(batch_size) is not int or batch_size < 1:
        raise ValueError(f"batch_size must be 1 or more, not {batch_size!r}.")
    if (
        isinstance(sleep_between_batches, bool)
        or not isinstance(sleep_between_batches, (int, float))
        or not sleep_between_batches >= 0
    ):
        raise ValueError(
            f"sleep_between_batches must be 0 or more seconds, not {sleep_between_batches!r}."
        )


def _declaration(key: str) -> rate_limit.RateLimit:
    """The limit whose budgets include ``key`` (a stacked limit's own, for its named budget).

    :raises ValueError: no registered job declares one.
    """
    declaration = rate_limit.declaration_for(key)
    if declaration is None:
        raise ValueError(
            f"No job registered in this process declares a rate limit whose budgets include"
            f" {key!r}. A budget key is '<group or job name>/<key>' (see"
            " Job.rate_limit_key_for(...)); import the module that defines the job first."
        )
    return declaration


def _check_units(units: object, declaration: rate_limit.RateLimit) -> None:
    if isinstance(units, bool) or not isinstance(units, int):
        raise ValueError(f"units must be a whole number of 1 or more, not {units!r}.")
    if not 1 <= units <= declaration.burst:
        raise ValueError(
            f"units must be 1 to the limit's burst ({declaration.burst}), not {units}: a"
            f" claim of more is never admitted under limits_rate({declaration.describe()})."
        )
