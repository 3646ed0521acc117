"""``solidq.rate_limiter``: read a rate-limit budget from anywhere in the app, declare named
budgets, take admissions from them outside jobs, and clear idle ones.

Queuety's programmatic limiter, over flask-solidq's budgets: ``is_limited`` and
``time_until_available`` answer from the budget's row and the limit that covers it, so they say
what the next claim by *any* worker would get, not what one process believes. Queuety's
``register()`` keeps its limit in one process's memory; here it declares a *named budget*
whose state is a database row, which jobs charge (``limits_rate(budget=)``) and code outside
jobs takes admissions from (``acquire``), across processes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import typing as t

import sqlalchemy as sa

from flask_solidq import errors
from flask_solidq.controls import rate_limit
from flask_solidq.controls.rate_limit import admissions
from flask_solidq.controls.rate_limit import budget_lookup
from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import gcra
from flask_solidq.controls.rate_limit import named_budgets
from flask_solidq.controls.rate_limit.available import admits_available
from flask_solidq.state import get_state
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from flask_solidq.values import JobArgument

if t.TYPE_CHECKING:
    from flask_solidq.controls.rate_limit.rate_charges import Charge
    from flask_solidq.definitions.job import Job


@dataclasses.dataclass(frozen=True)
class BudgetState:
    """What :meth:`RateLimiter.state` tells of one budget."""

    key: str
    #: When the next claim would be admitted (now, or later while the budget is spent).
    next_admission_at: dt.datetime
    #: Jobs waiting on the budget (deferred by their rate limit, not scheduled with wait=).
    waiting: int
    #: When the first waiting job's slot comes; None with none waiting.
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


#: What the limiter is asked about: a budget key, or a job definition (then followed by the
#: arguments of a call, as it would be enqueued with).
Target = t.Union[str, "type[Job]"]


class RateLimiter:
    """The budgets of the current app's queue. Every method but :meth:`register` requires an
    app context, and raises :class:`~flask_solidq.PendingMigrations` when the budgets table
    is missing.

    Each method that reads or charges a budget takes a budget key (``"Stripe/global"``, a
    named budget ``"stripe"``) or a job with the arguments of a call
    (``is_limited(SyncStripeJob, account_id)``; the job's name works too, given arguments).
    Asked by job, the answer covers every budget the call would charge (stacked limits), each
    by the call's cost. A job's name alone is a key only when the job's one budget is the bare
    budget of that name; otherwise ValueError names the keys to ask for. (A job argument
    named ``units``, ``seconds`` or ``timeout`` can't be passed here by keyword.)
    """

    def register(self, name: str, *, to: int, per: float | dt.timedelta, burst: int = 1) -> str:
        """Declare the named budget ``name``: at most ``to`` admissions in any ``per``,
        ``burst`` at once, shared by the jobs that declare ``limits_rate(budget=name)`` and by
        :meth:`acquire`. Its state is a ``solidq_rate_limits`` row keyed ``name``, so it holds
        across processes; the declaration lives in this process, so register it at import in
        every process that uses it (as ``limits_rate`` is declared), before the jobs naming
        it. Registering again with the same figures does nothing. Return ``name``.

        :raises ValueError, TypeError: an option is invalid (as ``limits_rate``'s), ``name``
            isn't a non-empty ``str`` without ``/``, or it is registered with other figures.
        """
        limit = rate_limit.named_budget(name, to=to, per=per, burst=burst)
        named_budgets.add(limit)
        return name

    def is_limited(
        self, target: Target, *args: JobArgument, units: int | None = None, **kwargs: JobArgument
    ) -> bool:
        """True while a claim of a job with this budget key (charging ``units``, under a
        limit counted in units), or of this job's call, would be deferred now.

        :raises ValueError: no registered limit covers the key, the key is a job's name whose
            budgets differ from it, the job declares no rate limit, or ``units`` is outside 1
            to the limit's burst.
        :raises TypeError: ``units`` with a job, or arguments with a key.
        """
        return self._time_until(target, args, kwargs, units, "is_limited") > 0

    def time_until_available(
        self, target: Target, *args: JobArgument, units: int | None = None, **kwargs: JobArgument
    ) -> float:
        """Seconds until a claim of a job with this budget key is admitted (0.0 if now); with
        ``units``, until a claim of that many units is (a limit counted in units admits a
        large call later than a small one). Asked by job, until every budget of the call
        admits it (0.0 for a call whose keys come out blank: it isn't limited).

        :raises ValueError, TypeError: as :meth:`is_limited`.
        """
        return self._time_until(target, args, kwargs, units, "time_until_available")

    def state(self, target: Target, *args: JobArgument, **kwargs: JobArgument) -> BudgetState:
        """The budget of a key: next admission, what it admits now, jobs waiting, next
        check, last slot, and its limit's kind (units or claims) and name. Asked by job, the
        state of the call's budget that admits it last (its main one on a tie), its next
        admission counted in the call's cost.

        :raises ValueError: as :meth:`is_limited`, or the call isn't limited (its keys come
            out blank).
        """
        charges = self._charges(target, args, kwargs, None, "state")
        with budget_table.required(), db.read(self._engine()) as connection:
            now = database_clock.now(connection)
            states = [_state(connection, charge, now) for charge in charges]
        return max(states, key=lambda state: state.next_admission_at)

    def back_off(
        self,
        target: Target,
        *args: JobArgument,
        seconds: float | dt.timedelta,
        **kwargs: JobArgument,
    ) -> dt.datetime:
        """Pause the budget ``target`` (a key as stored, ``"sync_shop/acme"``; or every
        budget of a job's call): it admits nothing for ``seconds`` (a number above 0 or a
        ``timedelta``), counted from the database's clock, then admits at its rate again (at
        most its burst at once). A longer pause already there is kept. The jobs already
        waiting on it are refused when their slots come and get new ones after the pause,
        spending no attempt. Sends ``rate_limit_back_off``. Return until when the budget is
        paused (by the database's clock; for several, the latest).

        :raises ValueError: as :meth:`state`, or ``seconds`` isn't above 0.
        :raises TypeError: ``seconds`` is neither a number nor a ``timedelta``.
        """
        pause = errors.pause_of(seconds, name="back_off(seconds=)")
        charges = self._charges(target, args, kwargs, None, "back_off")
        until = admissions.pause_all(self._engine(), {charge.key: pause for charge in charges})
        return max(until.values())

    def acquire(
        self,
        target: Target,
        *args: JobArgument,
        timeout: float | dt.timedelta | None = None,
        units: int | None = None,
        **kwargs: JobArgument,
    ) -> t.ContextManager[admissions.Admission]:
        """Take an admission from a budget (a registered budget's name, or any budget key
        a job's limit covers; or every budget of a job's call) for code outside jobs::

            with solidq.rate_limiter.acquire("stripe", timeout=5):
                stripe.Charge.create(...)

        It is admitted as a worker's claim is, on the budget's row by the database's clock,
        so jobs and callers share the budget's window bound. Refused, it waits for the next
        admission and tries again, for up to ``timeout`` seconds (None, the default: as long
        as it takes; 0: not at all). ``RateLimited`` raised in the block (the API said 429)
        pauses the budgets for its ``retry_after``, as a job's does, then propagates. The
        block gets an :class:`~flask_solidq.controls.rate_limit.admissions.Admission`. A call whose
        keys come out blank isn't limited: it is admitted at once, charging nothing.

        :raises flask_solidq.errors.RateLimited: (with ``keys``, pausing nothing) none within
            ``timeout``; raised at once when the next admission is later than that, with its
            ``retry_after`` the time until it (a view can answer 429 with it).
        :raises ValueError, TypeError: as :meth:`is_limited`, or ``timeout`` is negative or
            not a number or ``timedelta``.
        :raises RuntimeError: inside a ``solidq.transaction()`` block.
        """
        seconds = _timeout_seconds(timeout)
        charges = self._charges(target, args, kwargs, units, "acquire")
        return admissions.acquire(self._engine(), charges, seconds)

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

    def _time_until(
        self,
        target: Target,
        args: tuple[JobArgument, ...],
        kwargs: dict[str, JobArgument],
        units: int | None,
        asked: str,
    ) -> float:
        charges = budget_lookup.charges_for(target, args, kwargs, units, asked=asked)
        if not charges:
            return 0.0
        with budget_table.required(), db.read(self._engine()) as connection:
            now = database_clock.now(connection)
            at = max(
                (budgets.read(connection, c.key) or gcra.Budget()).available_at(
                    c.rate, now, c.units
                )
                for c in charges
            )
        return max(0.0, (at - now).total_seconds())

    def _charges(
        self,
        target: Target,
        args: tuple[JobArgument, ...],
        kwargs: dict[str, JobArgument],
        units: int | None,
        asked: str,
    ) -> list[Charge]:
        """:func:`budget_lookup.charges_for`, refusing a call that charges nothing where a
        budget is needed (``state``, ``back_off``)."""
        charges = budget_lookup.charges_for(target, args, kwargs, units, asked=asked)
        if not charges and asked != "acquire":
            raise ValueError(
                f"rate_limiter.{asked}(): this call of {target!r} isn't limited (its budget"
                " keys come out blank), so it has no budget."
            )
        return charges

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


def _state(connection: sa.Connection, charge: Charge, now: dt.datetime) -> BudgetState:
    """The state of ``charge``'s budget at ``now``, its next admission counted in the
    charge's units."""
    limit, key = charge.limit, charge.key
    budget = budgets.read(connection, key) or gcra.Budget()
    waiting = budgets.waiting(connection, key)
    paused = budget.backed_off_until
    return BudgetState(
        key=key,
        next_admission_at=budget.available_at(gcra.rate_of(limit), now, charge.units),
        waiting=waiting[0].size if waiting else 0,
        next_check_at=waiting[0].next_check_at if waiting else None,
        last_slot_at=budget.last_slot_at,
        available=admits_available(budget, gcra.rate_of(limit), now),
        counts_units=limit.counts_units,
        limit_name=limit.name,
        backed_off_until=paused if paused is not None and paused > now else None,
    )


def _timeout_seconds(timeout: object) -> float | None:
    """``acquire``'s timeout in seconds (None: no limit).

    :raises TypeError, ValueError: it is neither None, a number nor a ``timedelta``, or it
        is negative (or not finite).
    """
    if timeout is None:
        return None
    if isinstance(timeout, dt.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError(f"acquire(timeout=) takes seconds, a timedelta or None, not {timeout!r}.")
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"acquire(timeout=) must be 0 or more seconds, not {timeout!r}.")
    return seconds
