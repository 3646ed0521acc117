"""Why a job is waiting, and until when, in words: what the dashboard's job page says about a
job that hasn't run yet. Each reason reads what holds the job (its queue's pause, its
rate-limit budget, its concurrency key's slots, its open coalesce key, its schedule) through
the same reads as the rest of the dashboard."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from flask_solidq.controls import rate_limit
from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import gcra
from flask_solidq.controls.rate_limit import rate_charges
from flask_solidq.definitions import registry
from flask_solidq.errors import JobNotFound
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.models.tables import SEMAPHORES
from flask_solidq.reads import control_reads
from flask_solidq.reads import queue_figures
from flask_solidq.reads.browse import State
from flask_solidq.reads.job_detail import JobDetail

_WAITING = (State.SCHEDULED, State.DEFERRED, State.READY, State.BLOCKED)


def reasons(connection: sa.Connection, detail: JobDetail, now: dt.datetime) -> list[str]:
    """What keeps the job of ``detail`` from running now; empty for a job that isn't
    waiting (running, finished, failed)."""
    job = detail.summary
    if job.state not in _WAITING:
        return []
    found: list[str] = []
    if job.queue_name in queue_figures.paused_queues(connection):
        found.append(
            f"Its queue {job.queue_name} is paused: workers claim nothing from it until it is"
            " resumed."
        )
    if job.state in (State.SCHEDULED, State.DEFERRED):
        found.append(_schedule(connection, detail, now))
    if job.state is State.BLOCKED and detail.concurrency_key:
        found.append(_blocked(connection, detail.concurrency_key))
    if detail.coalesce_key:
        found.append(_coalescing(connection, detail, job.class_name))
    if job.state is State.READY and not found:
        found.append("It is ready: the next idle worker of its queue claims it.")
    return found


def _schedule(connection: sa.Connection, detail: JobDetail, now: dt.datetime) -> str:
    job = detail.summary
    execution_at: dt.datetime | None = connection.scalar(
        sa.select(SCHEDULED.c.scheduled_at).where(SCHEDULED.c.job_id == job.id)
    )
    due = execution_at or job.scheduled_at
    when = f"{due:%Y-%m-%d %H:%M:%S} UTC" if due else "now"
    key = detail.rate_limit_key
    waiting = budgets.waiting(connection, key) if key and job.state is State.DEFERRED else []
    if not key or not waiting:
        return f"It is scheduled: due at {when}."
    if not budget_table.exists(connection):
        return (
            f"It waits for the rate limit {key}, which can't be checked: the table"
            f" {budget_table.NAME} is missing, so it is deferred a minute at a time (its slot:"
            f" {when}). {budget_table.FIX}"
        )
    charges = rate_charges.parse(detail.rate_limit_charges or "") or [("", key, 1)]
    latest = _latest_admission(connection, charges, now)
    if latest is None:
        return (
            f"It waits for the rate limit {key} (its job isn't imported here, so its next"
            f" admission can't be worked out); its slot is at {when}."
        )
    admits, budget_key, units = latest
    admission = _at(admits, now)
    admitted = _at(control_reads.admitted_at(due, admits), now)
    claim = "claim" if units == 1 else f"{units} units"
    which = (
        f", the last of its {len(charges)} limits to admit it"
        if len(charges) > 1
        else f" ({_jobs_waiting(waiting[0].size)})"
    )
    return (
        f"It waits for the rate limit {budget_key}{which}: the budget admits its next {claim}"
        f" {admission} and this job's slot is at {when}, so it is admitted {admitted}."
    )


def _at(moment: dt.datetime, now: dt.datetime) -> str:
    return "now" if moment <= now else f"at {moment:%Y-%m-%d %H:%M:%S} UTC"


def _latest_admission(
    connection: sa.Connection, charges: list[tuple[str, str, int]], now: dt.datetime
) -> tuple[dt.datetime, str, int] | None:
    """When the last of a job's budgets admits its units, which budget and how many units;
    None when a budget's limit isn't declared by a job this app imports."""
    latest: tuple[dt.datetime, str, int] | None = None
    for _name, key, units in charges:
        declaration = rate_limit.declaration_for(key)
        if declaration is None:
            return None
        budget = budgets.read(connection, key) or gcra.Budget()
        admits = budget.available_at(gcra.rate_of(declaration), now, units)
        if latest is None or admits > latest[0]:
            latest = (admits, key, units)
    return latest


def _blocked(connection: sa.Connection, key: str) -> str:
    semaphore = connection.execute(
        sa.select(SEMAPHORES.c.value, SEMAPHORES.c.expires_at).where(SEMAPHORES.c.key == key)
    ).first()
    holders = [
        str(job_id) for job_id in control_reads.running_holders(connection, [key]).get(key, [])
    ]
    held = (
        f"held by running jobs {', '.join(holders)}"
        if holders
        else "held by jobs not running yet (ready) or gone (until the lease ends)"
    )
    lease = (
        f"; its lease ends at {semaphore.expires_at:%Y-%m-%d %H:%M:%S} UTC"
        if semaphore is not None
        else ""
    )
    return f"It waits for a slot of the concurrency key {key}, {held}{lease}."


def _coalescing(connection: sa.Connection, detail: JobDetail, job_name: str) -> str:
    opened = connection.scalar(
        sa.select(COALESCE_KEYS.c.created_at).where(COALESCE_KEYS.c.key == detail.coalesce_key)
    )
    text = f"It still takes calls under the coalesce key {detail.coalesce_key}"
    try:
        declaration = registry.lookup(job_name)._coalesce
    except JobNotFound:
        declaration = None
    if declaration is not None and declaration.debounce is not None and opened is not None:
        text += f": each call moves it to {declaration.debounce:g} s after the call"
        if declaration.max_wait is not None:
            cap = opened + dt.timedelta(seconds=declaration.max_wait)
            text += f", no later than {cap:%Y-%m-%d %H:%M:%S} UTC (max_wait)"
    return text + "."


def _jobs_waiting(size: int) -> str:
    return "1 job waits on it" if size == 1 else f"{size} jobs wait on it"
