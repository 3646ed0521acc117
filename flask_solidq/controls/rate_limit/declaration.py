"""``limits_rate``: workers claim no more of a key's jobs in any ``per`` than ``to``.

The limit is checked inside the claim transaction (GCRA on one budget row per key); a job
over it waits as a scheduled job with a staggered slot instead of holding a worker thread.
Here: the declaration, the key computed at enqueue into ``solidq_jobs.rate_limit_key``, and
the claim hook; the arithmetic is in :mod:`~flask_solidq.controls.rate_limit.gcra` and the budget
rows in :mod:`~flask_solidq.controls.rate_limit.budgets`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import typing as t

from flask_solidq import keys
from flask_solidq.controls.concurrency import declaration as concurrency
from flask_solidq.controls.rate_limit import named_budgets
from flask_solidq.definitions import declarations
from flask_solidq.definitions import declared
from flask_solidq.definitions import options
from flask_solidq.definitions.declarations import Target
from flask_solidq.definitions.declared import DeclaredAttributes
from flask_solidq.definitions.rate_limits import RateLimit

#: The shortest interval between admissions a limit may declare, in seconds.
MIN_INTERVAL = 0.001

#: The shortest interval per unit a limit counted in units may declare, in seconds: the
#: resolution of the budgets' times. A quota of tokens refills many units a millisecond (90,000
#: a minute is one every 0.67 ms), and the interval is rounded up to the microsecond, so the
#: rounding costs at most a microsecond per unit: under 1% of the rate while the interval is
#: 100 µs or more (6,000,000 units a minute).
MIN_UNIT_INTERVAL = 0.000001

logger = logging.getLogger("flask_solidq")

#: The limits :func:`warn_whole_quota_bursts` has warned about in this process, by job name
#: and limit name.
_warned: set[tuple[str, str | None]] = set()


def limits_rate(
    *,
    to: int | None = None,
    per: dt.timedelta | float | None = None,
    key: keys.KeyDeclaration = keys.BARE,
    burst: int | None = None,
    group: keys.KeyDeclaration = None,
    name: str | None = None,
    cost: int | t.Callable[..., int] | None = None,
    budget: str | None = None,
) -> t.Callable[[Target], Target]:
    """Admit at most ``to`` claims (or units) of the jobs sharing a budget in any window of
    ``per``.

    A quiet budget admits ``burst`` jobs at once, then one every ``per / (to - burst + 1)``.
    Limits stack: a job may declare several with distinct ``name=`` (one may have none), each
    with its own budgets; a claim is admitted only when every one admits it, and charges each.

    :param to: the most claims any ``per`` admits.
    :param per: the window, a timedelta or seconds.
    :param key: which jobs share a budget: a ``str`` literal (``"global"``), a callable over the
        job's arguments, or ``None``/``False`` to turn the limit off. Without it, the job's
        bare budget: its group's or its name (as a callable returning None gives).
    :param burst: how many a quiet budget admits at once, 1 to ``to`` (1 by default).
    :param group: share budgets with other job definitions naming the same group.
    :param name: tells a job's stacked limits apart (their budgets' keys carry it).
    :param cost: the units a call charges (tokens, an API's points): an int from 1 to
        ``burst`` (1 by default), or a callable of the job's arguments returning one, evaluated
        at enqueue. ``current_job.rate_limit_used(units)`` corrects it once the call knows
        what it took.
    :param budget: charge the named budget registered with ``solidq.rate_limiter.register``
        instead: its key is exactly that name, shared with every job and ``acquire`` naming
        it, and ``to``, ``per`` and ``burst`` are the registration's (only ``name=`` may go
        with it). It must be registered before the decorator runs.
    :raises ValueError, TypeError: an option is invalid, or ``budget`` isn't registered.
    """
    if budget is not None:
        declaration = _charging_budget(
            budget, name, to=to, per=per, key=key, burst=burst, group=group, cost=cost
        )
    elif to is None or per is None:
        raise TypeError(
            "limits_rate() needs to= and per= (the most claims in any window, and the window),"
            " or budget= naming a budget registered with solidq.rate_limiter.register."
        )
    else:
        declaration = checked(
            RateLimit(
                to=options.positive_int(to, option="to", decorator="limits_rate"),
                per=options.positive_seconds(per, option="per", decorator="limits_rate"),
                burst=options.positive_int(
                    1 if burst is None else burst, option="burst", decorator="limits_rate"
                ),
                key=key,
                group=group,
                name=_checked_name(name),
                cost=_checked_cost(1 if cost is None else cost),
            )
        )

    def apply(job_class: type[DeclaredAttributes]) -> None:
        declared.declare_on(job_class, "rate_limit", **stacked(job_class, declaration))
        concurrency.check_combinations(job_class)

    return lambda target: declarations.declare(target, apply, decorator="limits_rate")


def checked(declaration: RateLimit, decorator: str = "limits_rate") -> RateLimit:
    """``declaration`` once its figures are found consistent: a cost within the burst, the
    burst within ``to``, an interval the budgets' times can hold.

    :param decorator: what declared it, for the messages (``"rate_limiter.register"``).
    :raises ValueError: they aren't.
    """
    to, burst, cost = declaration.to, declaration.burst, declaration.cost
    if isinstance(cost, int) and cost > burst:
        raise ValueError(
            f"{decorator}(cost={cost}) can't exceed burst={burst}: no budget would ever admit"
            " a call; raise burst= (up to to=)."
        )
    if burst > to:
        raise ValueError(f"{decorator}(burst=) must be at most to={to}, not {burst}.")
    minimum, what = (
        (MIN_UNIT_INTERVAL, "unit") if declaration.counts_units else (MIN_INTERVAL, "job")
    )
    if declaration.interval < minimum:
        raise ValueError(
            f"{decorator} admits one {what} every per / (to - burst + 1) ="
            f" {declaration.interval:g}s, which must be at least {minimum:g}s; lower to= or"
            " raise per=."
        )
    return declaration


def warn_whole_quota_bursts(definitions: t.Iterable[type[DeclaredAttributes]]) -> None:
    """Warn, once per process and limit, of a limit counted in units (``cost=``) whose burst
    is its whole quota (``burst=to``): spent at once, it then refills one unit a window.

    Called as workers start, since their claims are what the budget admits: declaring the
    limit, importing the app, or any other command says nothing.
    """
    for definition in definitions:
        for limit in definition._declared.active_rate_limits:
            seen = (definition.job_name, limit.name)
            whole_quota = limit.counts_units and limit.burst == limit.to > 1
            if not whole_quota or seen in _warned:
                continue
            _warned.add(seen)
            logger.warning(
                "SolidQ: %s's limits_rate(to=%s, burst=%s, cost=...) admits %s units at once,"
                " then one unit every %gs, as burst=to does. For a quota of units, set burst to"
                " the largest call's cost: the budget then refills at to - burst + 1 units per"
                " per.",
                definition.job_name,
                limit.to,
                limit.burst,
                limit.burst,
                limit.interval,
            )


def named_budget(name: object, *, to: object, per: object, burst: object = 1) -> RateLimit:
    """The declaration of the budget ``name`` (``rate_limiter.register``), checked as
    ``limits_rate``'s options are.

    :raises ValueError, TypeError: an option is invalid, or the name isn't a non-empty ``str``
        without ``/`` that the key column takes.
    """
    where = "rate_limiter.register"
    if not isinstance(name, str) or not name.strip() or "/" in name or "\x00" in name:
        raise ValueError(
            f"{where}() takes a non-empty str without '/' or NUL (\\x00) as name, not {name!r}."
        )
    if len(name) > keys.MAX_KEY_LENGTH:
        raise ValueError(
            f"{where}() takes a name of at most {keys.MAX_KEY_LENGTH} characters (the budgets'"
            f" key column), not {len(name)}."
        )
    limit = RateLimit(
        to=options.positive_int(to, option="to", decorator=where),
        per=options.positive_seconds(per, option="per", decorator=where),
        burst=options.positive_int(burst, option="burst", decorator=where),
        key=keys.BARE,
        group=None,
        budget=name,
    )
    return checked(limit, where)


def _charging_budget(budget: object, name: object, **others: object) -> RateLimit:
    """A job's limit that charges the registered budget ``budget``, as ``name``.

    :raises TypeError: an option that the registration gives is declared too.
    :raises ValueError: ``budget`` isn't registered.
    """
    if not isinstance(budget, str):
        raise TypeError(f"limits_rate(budget=) takes a budget's name (a str), not {budget!r}.")
    given = [option for option, value in others.items() if value is not _UNSET[option]]
    if given:
        options_given = ", ".join(f"{option}=" for option in given)
        raise TypeError(
            f"limits_rate(budget={budget!r}) takes to=, per= and burst= from the budget's"
            f" registration and charges exactly the key {budget!r}: drop {options_given}, or"
            " declare a limit of the job's own without budget=."
        )
    registered = named_budgets.required(budget, by=f"limits_rate(budget={budget!r})")
    return dataclasses.replace(registered, name=_checked_name(name))


#: The value each option other than ``name`` has when ``limits_rate`` isn't given it.
_UNSET: dict[str, object] = {
    "to": None,
    "per": None,
    "key": keys.BARE,
    "burst": None,
    "group": None,
    "cost": None,
}


def stacked(job_class: type[DeclaredAttributes], declaration: RateLimit) -> dict[str, t.Any]:
    """The rate-limit fields of ``job_class``'s declarations once ``declaration`` is added:
    ``rate_limits`` in the order written (decorators apply innermost first, so it goes first),
    a subclass's limit replacing the inherited one of the same name; ``rate_limit`` the main
    one (the one without a name, else the first), whose budget key is ``rate_limit_key``.

    :raises ValueError: the class itself already declares a limit of that name.
    """
    own = job_class.__dict__.get("_declared")
    inherited = getattr(super(job_class, job_class), "_declared", None)
    inherited_limits = inherited.rate_limits if inherited is not None else ()
    current = job_class._declared.rate_limits
    if own is not None and any(
        limit.name == declaration.name and not any(limit is old for old in inherited_limits)
        for limit in current
    ):
        what = (
            "limits_rate twice"
            if declaration.name is None
            else f"two limits named {declaration.name!r}"
        )
        raise ValueError(
            f"{job_class.__qualname__} declares {what}; stacked limits need distinct name=."
        )
    limits = (declaration, *(limit for limit in current if limit.name != declaration.name))
    main = next((limit for limit in limits if limit.name is None), limits[0])
    return {"rate_limits": limits, "rate_limit": main}


def _checked_name(name: object) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"limits_rate(name=) must be a non-empty str without '/', not {name!r}.")
    return name


def _checked_cost(cost: object) -> int | t.Callable[..., int]:
    if callable(cost):
        return t.cast("t.Callable[..., int]", cost)
    return options.positive_int(cost, option="cost", decorator="limits_rate")
