"""The rate limit's hooks: the budget key stamped at enqueue, the GCRA admission inside the
claim transaction, the check of paused budgets as a job starts, and the signal for deferred
jobs. The declaration is in :mod:`.declaration`, the arithmetic in :mod:`.gcra`, the budget
rows in :mod:`.budgets`.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import keys
from flask_solidq import signals
from flask_solidq.controls.base import ClaimClock
from flask_solidq.controls.base import Control
from flask_solidq.controls.base import Deferral
from flask_solidq.controls.base import HeldAtStart
from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import local_pauses
from flask_solidq.controls.rate_limit import named_budgets
from flask_solidq.controls.rate_limit import rate_charges
from flask_solidq.definitions import registry
from flask_solidq.definitions.declared import Declared
from flask_solidq.storage import db
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob
    from flask_solidq.values import ControlKeys

#: The shortest interval between admissions a limit may declare, in seconds.

from flask_solidq.definitions.rate_limits import RateLimit


class RateLimitControl(Control):
    """The hooks of ``limits_rate``: the key at enqueue, GCRA admit-or-defer inside the
    claim, the ``defer_rate_limited`` signal once the claim committed."""

    def concerns_enqueue(self, declared: Declared) -> bool:
        return bool(declared.active_rate_limits)

    def stamp(self, job: Job, row: ControlKeys) -> None:
        rate_charges.stamp(job, row)

    def checked_at_claim(self) -> frozenset[str]:
        return frozenset(
            definition.job_name
            for definition in registry.definitions()
            if definition._rate_limit is not None
        )

    def claim(
        self, connection: sa.Connection, jobs: list[ClaimedJob], clock: ClaimClock
    ) -> list[Deferral]:
        """Admit or defer each limited job against its budget, in queue order.

        The budgets are locked (sorted by key, inserted when missing) for the rest of the
        claim's transaction, and only then is the clock read. A refused job waits until its
        budget's next free slot. For a worker that waits for a job's start, a job its budget
        admits within :attr:`~flask_solidq.controls.rate_limit.gcra.Rate.charge_ahead` is admitted
        for that moment (see "Charging ahead" in :mod:`~flask_solidq.controls.rate_limit.gcra`).
        """
        limited = [(job, charges) for job in jobs if (charges := rate_charges.of(job))]
        if not limited:
            return []
        if self._budgets_missing(connection):
            until = clock() + budget_table.TABLE_MISSING_WAIT
            return [Deferral(job, charges[0].key, until) for job, charges in limited]
        wanted = {charge.key for _job, charges in limited for charge in charges}
        states = budgets.lock(connection, wanted, utcnow())
        now = clock()
        local_pauses.write_into(states, wanted, now)
        deferrals = []
        ahead = None if clock.charges_ahead else dt.timedelta(0)  # None: the rates' own
        for job, charges in limited:
            charged = rate_charges.admit(states, charges, now, ahead)
            if charged is None:
                deferrals.append(Deferral(job, *rate_charges.defer(states, charges, now)))
            else:
                clock.charge_ahead(job.id, charged)
        budgets.save(connection, states, now)
        return deferrals

    def acts_at_start(self, claimed: ClaimedJob) -> bool:
        """A job stored with a budget key or charges (one stored before its definition
        declared a limit is checked at its claim only)."""
        return bool(claimed.rate_limit_key or claimed.rate_limit_charges)

    def start(self, engine: sa.Engine, claimed: ClaimedJob) -> tuple[ClaimedJob, None]:
        """Refuse the start of a job a budget of which is paused now (an API's 429 after its
        claim): paused by this process and maybe not yet stored
        (:mod:`~flask_solidq.controls.rate_limit.local_pauses`), or by the database's clock (one
        read of its budgets' rows, no lock). Jobs already running are not touched.

        :raises HeldAtStart: a budget is paused; the job goes back to wait.
        """
        keys = [charge.key for charge in rate_charges.of(claimed)]
        if not keys:
            return claimed, None
        noted = local_pauses.BOARD.remaining(keys)
        if noted:
            raise HeldAtStart(dt.timedelta(seconds=noted))
        try:
            with db.read(engine) as connection:
                paused = budgets.paused_until(connection, keys)
        except sa.exc.DBAPIError as error:
            # The budgets table went since the claim: the limit fails closed, the job waits
            # as a claim without the table would defer it.
            if budget_table.TABLE.noticed_missing(engine, error):
                raise HeldAtStart(wait=budget_table.TABLE_MISSING_WAIT) from error
            raise
        if paused is not None:
            raise HeldAtStart()
        return claimed, None

    def after_claim(self, engine: sa.Engine, deferrals: list[Deferral]) -> None:
        """Send ``defer_rate_limited`` once per job definition the claim deferred."""
        if not signals.defer_rate_limited.receivers:
            return
        by_class: dict[str, list[Deferral]] = {}
        for deferral in deferrals:
            by_class.setdefault(deferral.job.class_name, []).append(deferral)
        for class_name, deferred in by_class.items():
            signals.defer_rate_limited.send(
                registry.find(class_name),
                class_name=class_name,
                keys=list(dict.fromkeys(deferral.key for deferral in deferred)),
                job_ids=[deferral.job.id for deferral in deferred],
                size=len(deferred),
            )

    def claim_failed(self, connection: sa.Connection, error: BaseException) -> bool:
        """A claim that found the budgets table gone (dropped or renamed under a running
        worker) runs again, deferring the limited jobs (see :mod:`.budget_table`)."""
        return budget_table.TABLE.noticed_missing(connection, error)

    def _budgets_missing(self, connection: sa.Connection) -> bool:
        """Whether ``solidq_rate_limits`` is missing: then limited jobs wait, a minute at a
        time, and the rest run (the limit fails closed; see :mod:`.budget_table`)."""
        return budget_table.TABLE.is_missing(connection)


def declaration_for(key: str) -> RateLimit | None:
    """The ``limits_rate`` declaration whose budgets include ``key``: the named budget
    registered as ``key`` (``rate_limiter.register``); else that of the registered definition
    whose literal group, or whose name when it has no group (followed by the limit's name for
    a named one), starts the key (the longest such start wins); None when no registered
    definition's does (a group computed by a callable can't be matched from its key)."""
    named = named_budgets.find(key)
    if named is not None:
        return named
    best: tuple[int, RateLimit] | None = None
    for definition in registry.definitions():
        for declaration in definition._declared.active_rate_limits:
            if declaration.budget is not None:
                continue  # a named budget's key is its name alone, found above
            group = declaration.group
            scope = definition.job_name if keys.is_disabled(group) else group
            if not isinstance(scope, str):
                continue
            if declaration.name is not None:
                scope = f"{scope}/{declaration.name}"
            if not (key == scope or key.startswith(f"{scope}/")):
                continue
            if best is None or len(scope) > best[0]:
                best = (len(scope), declaration)
    return best[1] if best else None


CONTROL = RateLimitControl()
