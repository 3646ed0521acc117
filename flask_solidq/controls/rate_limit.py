"""``limits_rate``: workers claim no more of a key's jobs in any ``per`` than ``to``.

The limit is checked inside the claim transaction (GCRA on one budget row per key); a job
over it waits as a scheduled job with a staggered slot instead of holding a worker thread.
Here: the declaration, the key computed at enqueue into ``solidq_jobs.rate_limit_key``, and
the claim hook; the arithmetic is in :mod:`~flask_solidq.controls.gcra` and the budget rows in
:mod:`~flask_solidq.controls.budgets`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import typing as t

import sqlalchemy as sa

from flask_solidq import keys
from flask_solidq import signals
from flask_solidq.controls import budgets
from flask_solidq.controls import concurrency
from flask_solidq.controls import gcra
from flask_solidq.controls.base import ClaimClock
from flask_solidq.controls.base import Control
from flask_solidq.controls.base import Deferral
from flask_solidq.definitions import declarations
from flask_solidq.definitions import declared
from flask_solidq.definitions import options
from flask_solidq.definitions import registry
from flask_solidq.definitions.declarations import Target
from flask_solidq.definitions.declared import DeclaredAttributes
from flask_solidq.models.tables import BUDGETS
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob

#: The shortest interval between admissions a limit may declare, in seconds.
MIN_INTERVAL = 0.001

#: How long a limited job waits when the budgets table is missing, before it is looked at
#: again (the limit fails closed).
TABLE_MISSING_WAIT = dt.timedelta(minutes=1)

logger = logging.getLogger("flask_solidq")


@dataclasses.dataclass(frozen=True)
class RateLimit(keys.Keyed):
    """A validated ``limits_rate`` declaration."""

    to: int
    per: float
    burst: int
    key: keys.KeyDeclaration
    group: keys.KeyDeclaration

    @property
    def interval(self) -> float:
        """Seconds between admissions once the burst is spent: ``per / (to - burst + 1)``."""
        return self.per / (self.to - self.burst + 1)

    @functools.cached_property
    def rate(self) -> gcra.Rate:
        """The limit as the GCRA arithmetic takes it."""
        return gcra.Rate.of(self.to, self.per, self.burst)

    def stored_key(self, job_name: str, args: tuple[t.Any, ...], kwargs: dict[str, t.Any]) -> str:
        """The ``solidq_jobs.rate_limit_key`` of a call: a blank key is stored as ``""`` (the
        job is not limited), apart from None, which a job stored before its definition
        declared the limit holds (it uses the bare budget: see ``_limit_of``).

        :raises ValueError: the key is longer than its column takes.
        """
        key = self.key_for(job_name, args, kwargs)
        keys.check_length(key, job_name, "rate-limit key")
        return t.cast(str, key)  # the control is on: key_for gives a str


def limits_rate(
    *,
    to: int,
    per: dt.timedelta | float,
    key: keys.KeyDeclaration,
    burst: int = 1,
    group: keys.KeyDeclaration = None,
) -> t.Callable[[Target], Target]:
    """Admit at most ``to`` claims of the jobs sharing a budget in any window of ``per``.

    A quiet budget admits ``burst`` jobs at once, then one every ``per / (to - burst + 1)``.

    :param to: the most claims any ``per`` admits.
    :param per: the window, a timedelta or seconds.
    :param key: which jobs share a budget: a ``str`` literal (``"global"``), a callable over the
        job's arguments, or ``None``/``False`` to turn the limit off.
    :param burst: how many a quiet budget admits at once, 1 to ``to``.
    :param group: share budgets with other job definitions naming the same group.
    :raises ValueError, TypeError: an option is invalid.
    """
    name = "limits_rate"
    declaration = RateLimit(
        to=options.positive_int(to, option="to", decorator=name),
        per=options.positive_seconds(per, option="per", decorator=name),
        burst=options.positive_int(burst, option="burst", decorator=name),
        key=key,
        group=group,
    )
    if declaration.burst > declaration.to:
        raise ValueError(f"limits_rate(burst=) must be at most to={to}, not {burst}.")
    if declaration.interval < MIN_INTERVAL:
        raise ValueError(
            f"limits_rate admits one job every per / (to - burst + 1) = {declaration.interval:g}s,"
            f" which must be at least {MIN_INTERVAL}s; lower to= or raise per=."
        )

    def apply(job_class: type[DeclaredAttributes]) -> None:
        if declared.declares_own(job_class, "rate_limit"):
            raise ValueError(
                f"{job_class.__qualname__} declares limits_rate twice; a job has one rate limit."
            )
        declared.declare_on(job_class, "rate_limit", rate_limit=declaration)
        concurrency.check_combinations(job_class)

    return lambda target: declarations.declare(target, apply, decorator=name)


class RateLimitControl(Control):
    """The hooks of ``limits_rate``: the key at enqueue, GCRA admit-or-defer inside the
    claim, the ``defer_rate_limited`` signal once the claim committed."""

    def __init__(self) -> None:
        self._table_missing: set[str] = set()
        self._table_present: set[str] = set()

    def stamp(self, job: Job, row: dict[str, t.Any]) -> None:
        declaration = type(job)._declared.active_rate_limit
        if declaration is not None:
            row["rate_limit_key"] = declaration.stored_key(
                type(job).job_name, job.arguments, job.kwargs
            )

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
        admits within :attr:`~flask_solidq.controls.gcra.Rate.charge_ahead` is admitted for that
        moment (see "Charging ahead" in :mod:`~flask_solidq.controls.gcra`).
        """
        limited = [(job, *limit) for job in jobs if (limit := _limit_of(job)) is not None]
        if not limited:
            return []
        if self._budgets_missing(connection):
            until = clock() + TABLE_MISSING_WAIT
            return [Deferral(job, key, until) for job, _rate, key in limited]
        states = budgets.lock(connection, (key for _job, _rate, key in limited), utcnow())
        now = clock()
        deferrals = []
        ahead = None if clock.charges_ahead else dt.timedelta(0)  # None: the rate's own
        for job, rate, key in limited:
            budget = states[key]
            charged = budget.admit_ahead(rate, now, ahead)
            if charged is None:
                deferrals.append(Deferral(job, key, gcra.retry_time(budget, rate, now)))
            else:
                clock.charge_ahead(job.id, charged)
        budgets.save(connection, states, now)
        return deferrals

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

    def _budgets_missing(self, connection: sa.Connection) -> bool:
        """Whether ``solidq_rate_limits`` is missing: then limited jobs wait, a minute at a
        time, and this process logs one error (the limit fails closed). Cached per database
        for the life of the process, as the table check at enqueue is: restart workers after
        migrating."""
        url = connection.engine.url.render_as_string()
        if url in self._table_missing:
            return True
        if url in self._table_present:
            return False
        if sa.inspect(connection).has_table(BUDGETS.name):
            self._table_present.add(url)
            return False
        self._table_missing.add(url)
        logger.error(
            "SolidQ can't check rate limits: the table %s is missing, so rate-limited jobs"
            " wait a minute at a time instead of running. Run `flask solidq install` and"
            " `flask db upgrade`, then restart the workers.",
            BUDGETS.name,
        )
        return True


def declaration_for(key: str) -> RateLimit | None:
    """The ``limits_rate`` declaration whose budgets include ``key``: that of the registered
    definition whose literal group, or whose name when it has no group, starts the key (the
    longest such start wins); None when no registered definition's does (a group computed
    by a callable can't be matched from its key)."""
    best: tuple[int, RateLimit] | None = None
    for definition in registry.definitions():
        declaration = definition._rate_limit
        if declaration is None:
            continue
        group = declaration.group
        scope = definition.job_name if keys.is_disabled(group) else group
        if not isinstance(scope, str) or not (key == scope or key.startswith(f"{scope}/")):
            continue
        if best is None or len(scope) > best[0]:
            best = (len(scope), declaration)
    return best[1] if best else None


def limits_of(job: ClaimedJob) -> list[tuple[gcra.Rate, str]]:
    """The rate and budget key of each budget a claimed job is checked against (and so was
    admitted by, once claimed), in key order; none when the job isn't limited. The one place
    that says which budgets a job has: a back-off (``RateLimited``) pauses each of them."""
    limit = _limit_of(job)
    return [] if limit is None else [limit]


def budget_keys_of(job: ClaimedJob) -> list[str]:
    """The keys of the budgets a claimed job was admitted by (see :func:`limits_of`)."""
    return [key for _rate, key in limits_of(job)]


def _limit_of(job: ClaimedJob) -> tuple[gcra.Rate, str] | None:
    """The rate and budget key a claimed job is checked against, from its definition's
    declaration now; no key when the job isn't limited.

    A job stored without a key (enqueued before its definition declared the limit) uses the
    bare budget of its definition; a blank stored key (``""``) leaves it unlimited; a
    definition that doesn't load, or declares no limit now, isn't limited (None).
    """
    definition = registry.find(job.class_name, job.arguments)
    declaration = definition._declared.active_rate_limit if definition is not None else None
    if declaration is None:
        return None
    key = job.rate_limit_key
    if key is None:
        key = t.cast("type[Job]", definition).job_name
    return (declaration.rate, key) if key else None


CONTROL = RateLimitControl()
