"""What ``solidq.rate_limiter`` is asked about, as the budgets it charges (:class:`Charge`).

A caller names either a budget key (``"Stripe/global"``, a named budget ``"stripe"``) or a job
with the arguments of a call (``SyncStripeJob, account_id``; or the job's name, with
arguments), as a Queuety user asks by handler. A job's call has a budget per limit it declares
(stacked ``limits_rate``), each charged its cost, exactly as its enqueue would store them; a
key is one budget, charged ``units``.

A job's name alone is a key only where both readings agree: where the job's one budget is the
bare one of its name. Otherwise it is refused with the keys to ask for instead, since the bare
budget of a job limited by ``key="global"`` is another row, which nothing charges.
"""

from __future__ import annotations

from flask_solidq.controls.rate_limit import control as rate_limit
from flask_solidq.controls.rate_limit import named_budgets
from flask_solidq.controls.rate_limit.rate_charges import Charge
from flask_solidq.definitions import registry
from flask_solidq.definitions.job import Job
from flask_solidq.definitions.rate_limits import RateLimit
from flask_solidq.values import JobArgument


def charges_for(
    target: object,
    args: tuple[JobArgument, ...],
    kwargs: dict[str, JobArgument],
    units: int | None,
    *,
    asked: str,
) -> list[Charge]:
    """The budgets ``target`` (a key, or a job with ``args`` and ``kwargs``) names, each with
    its units; empty for a call whose keys come out blank (it isn't limited).

    :param asked: the limiter's method, for the messages (``"is_limited"``).
    :raises ValueError: no registered limit covers the key; the key is a job's name whose
        budgets differ from it; the job declares no rate limit; ``units`` is outside 1 to the
        limit's burst.
    :raises TypeError: ``target`` is neither a str nor a job definition, a key is given
        arguments, or a job is given ``units``.
    """
    if isinstance(target, type) and issubclass(target, Job):
        return _of_call(target, args, kwargs, units, asked)
    if not isinstance(target, str):
        raise TypeError(
            f"rate_limiter.{asked}() takes a budget key (a str) or a job definition, not"
            f" {target!r}."
        )
    if args or kwargs:
        return _of_call(_job_named(target, asked), args, kwargs, units, asked)
    return [_of_key(target, units, asked)]


def _of_key(key: str, units: int | None, asked: str) -> Charge:
    limit = named_budgets.find(key)
    if limit is None:
        job = registry.find(key)
        if job is not None and job._declared.active_rate_limits:
            budgets = _keys_without_arguments(job)
            if budgets != [key]:
                raise ValueError(_is_a_job(key, job, budgets, asked))
        limit = rate_limit.declaration_for(key)
    if limit is None:
        raise ValueError(
            f"No job registered in this process declares a rate limit whose budgets include"
            f" {key!r}, and no budget of that name is registered. A budget key is"
            " '<group or job name>/<key>' (see Job.rate_limit_key_for(...)), or the name given"
            " to solidq.rate_limiter.register; import the module that defines the job or the"
            " budget first."
        )
    return Charge(limit, key, _checked_units(1 if units is None else units, limit))


def _of_call(
    job: type[Job],
    args: tuple[JobArgument, ...],
    kwargs: dict[str, JobArgument],
    units: int | None,
    asked: str,
) -> list[Charge]:
    limits = job._declared.active_rate_limits
    if not limits:
        raise ValueError(f"{_shown(job)} ({job.job_name!r}) declares no rate limit.")
    if units is not None:
        raise TypeError(
            f"rate_limiter.{asked}() asked by job charges each budget the call's own cost:"
            " units= goes with a budget key only."
        )
    name = job.job_name
    charges = []
    for limit in limits:
        key = limit.key_for(name, args, kwargs)
        if key:
            charges.append(Charge(limit, key, limit.units_for(name, args, kwargs)))
    return charges


def _job_named(name: str, asked: str) -> type[Job]:
    job = registry.find(name)
    if job is None:
        raise ValueError(
            f"rate_limiter.{asked}({name!r}, ...) asks by job, but no job named {name!r} is"
            " registered in this process; import the module that defines it first."
        )
    return job


def _keys_without_arguments(job: type[Job]) -> list[str] | None:
    """The job's budget keys, when no argument goes into them (literal keys and groups, a
    named budget); None when they depend on the call's arguments. Runs no user code."""
    found = []
    for limit in job._declared.active_rate_limits:
        if limit.budget is None and (callable(limit.key) or callable(limit.group)):
            return None
        key = limit.key_for(job.job_name, (), {})
        if key:
            found.append(key)
    return found


def _is_a_job(name: str, job: type[Job], budgets: list[str] | None, asked: str) -> str:
    """The message refusing a job's name asked as a key: which keys to ask for instead."""
    shown = _shown(job)
    by_job = f"{asked}({shown}, *args)" if budgets is None else f"{asked}({shown})"
    if budgets is None:
        return (
            f"{name!r} is a job; its budget keys depend on the call's arguments: ask"
            f" rate_limiter.{by_job}, or by key ({shown}.rate_limit_key_for(*args))."
        )
    if len(budgets) == 1:
        return (
            f"{name!r} is a job; its budget is {budgets[0]!r}: ask"
            f" rate_limiter.{asked}({budgets[0]!r}) or {by_job}."
        )
    listed = ", ".join(repr(key) for key in budgets)
    return (
        f"{name!r} is a job; its budgets are {listed}: ask rate_limiter.{asked}() with one of"
        f" those keys, or {by_job} for all of them."
    )


def _shown(job: type[Job]) -> str:
    """The job definition as its module names it (a function job by its function's name)."""
    return str(getattr(job, "function", job).__qualname__)


def _checked_units(units: object, limit: RateLimit) -> int:
    if isinstance(units, bool) or not isinstance(units, int):
        raise ValueError(f"units must be a whole number of 1 or more, not {units!r}.")
    if not 1 <= units <= limit.burst:
        raise ValueError(
            f"units must be 1 to the limit's burst ({limit.burst}), not {units}: a"
            f" claim of more is never admitted under limits_rate({limit.describe()})."
        )
    return units
