"""The dashboard's pages for what the controls store: rate-limit budgets, coalesce keys,
concurrency keys (their blocked jobs and semaphores), and the registered processes. Each
reads through :mod:`flask_solidq.reads.control_reads` (and the figures of
:mod:`~flask_solidq.reads.queue_figures` / :mod:`~flask_solidq.controls.rate_limit.budgets`), a
page at a time: every list that grows with the queue is keyset-paginated (``?after=``, the last key
or
id of the previous page), the figures per job name are bounded by the app's definitions.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from flask import Blueprint
from flask import render_template

from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.dashboard import budget_charts
from flask_solidq.dashboard import params
from flask_solidq.dashboard import reading
from flask_solidq.formatting import count_of
from flask_solidq.formatting import format_age
from flask_solidq.formatting import format_expiry
from flask_solidq.formatting import format_when
from flask_solidq.operations.process_commands import claims_jobs
from flask_solidq.operations.process_commands import state_of
from flask_solidq.reads import control_reads
from flask_solidq.reads import queue_figures
from flask_solidq.state import get_state
from flask_solidq.timing import utcnow

#: Rows per page of each list.
PAGE_SIZE = 50


def add_routes(blueprint: Blueprint) -> None:
    """Add the pages: ``.budgets``, ``.coalescing``, ``.concurrency``, ``.processes`` (the
    recurring tasks' are :mod:`.recurring_views`'s). The concurrency keys' page is not named
    "blocked": the jobs list of that state (``.jobs?state=blocked``) has the name, and the two
    were once both "Blocked jobs"."""
    blueprint.add_url_rule("/budgets", "budgets", budgets_page)
    blueprint.add_url_rule("/coalescing", "coalescing", coalescing_page)
    blueprint.add_url_rule("/concurrency", "concurrency", concurrency_page)
    blueprint.add_url_rule("/processes", "processes", processes_page)


@dataclasses.dataclass(frozen=True)
class BudgetView:
    """One budget as the page shows it, in words where the app can't compute a figure."""

    key: str
    limit: str
    #: What the budget is doing, in a sentence (:func:`describe_budget`).
    doing: str
    waiting: int
    #: When it next admits a job, as ``flask solidq status`` says it
    #: (:func:`~flask_solidq.reads.control_reads.describe_next_admission`).
    next_admission: str
    #: When its first deferred job's slot comes.
    next_slot: str
    updated_at: dt.datetime


def budgets_page() -> str:
    """Every ``solidq_rate_limits`` row: its limit, what it is doing (:func:`describe_budget`),
    the jobs it deferred, its next admission and its next slot; then, for
    those that admitted any lately, their admissions per second against their limit."""
    now = utcnow()
    after = params.text_cursor("after")
    with reading.page() as connection:
        table_missing = not budget_table.exists(connection)
        page = (
            []
            if table_missing
            else control_reads.budget_page(connection, after=after, limit=PAGE_SIZE)
        )
        keys = [row.key for row in page]
        waiting = {entry.key: entry for entry in budgets.waiting(connection, keys=keys)}
    rows = [_budget_view(row, waiting.get(row.key), now) for row in page]
    return render_template(
        "solidq/budgets.html",
        table_missing=table_missing,
        rows=rows,
        charts=budget_charts.charts(page, now),
        after=after,
        next_after=page[-1].key if len(page) == PAGE_SIZE else None,
        now=now,
        done=params.done(),
    )


def _budget_view(
    row: control_reads.BudgetRow, waiting: budgets.Waiting | None, now: dt.datetime
) -> BudgetView:
    outlook = control_reads.budget_outlook(row.key, row.budget, now)
    return BudgetView(
        key=row.key,
        # "?": the job that declares it isn't imported by this app, so its limit is unknown.
        limit=outlook.limit.in_words() if outlook else "?",
        doing=describe_budget(outlook, waiting, now) if outlook else "?",
        waiting=waiting.size if waiting else 0,
        next_admission=control_reads.describe_next_admission(outlook, waiting, now),
        next_slot=format_when(waiting.next_check_at, now) if waiting else "-",
        updated_at=row.updated_at,
    )


def describe_budget(
    outlook: control_reads.BudgetOutlook, waiting: budgets.Waiting | None, now: dt.datetime
) -> str:
    """What a budget is doing, in words, its next admission said as its column (and
    ``flask solidq status``) says it. Its figures alone misled: beside 30 deferred jobs,
    "admits 1 now" read as a stuck queue, when each deferred job waits for the slot it was
    given and the free admission is for a new claim. A limit counted in units
    says units where others say claims: "admits 90 units now" of a budget of 100 units a
    minute, not "90 claims", which a call of 50 units would belie."""
    free = outlook.available
    units = outlook.counts_units
    when = control_reads.describe_next_admission(outlook, waiting, now)
    if waiting and waiting.next_check_at > now:
        spare = f"; {count_of(free, units)} free now for a new claim" if free else ""
        return (
            f"Draining {count_of(waiting.size, False, 'deferred job')} one slot at a time: the"
            f" next is admitted {when}{spare}."
        )
    if waiting:
        return (
            f"{count_of(waiting.size, False, 'deferred job')} due: each is admitted, or deferred"
            " again, when a worker claims it."
        )
    if free:
        return f"Open: admits {count_of(free, units, 'claim')} now."
    return f"Spent: admits the next {'unit' if units else 'claim'} {when}."


def coalescing_page() -> str:
    """Per coalescing job: open keys, waiting calls, the oldest call's age; then the open
    keys themselves, oldest first."""
    now = utcnow()
    after = params.int_cursor("after")
    with reading.page() as connection:
        summary = queue_figures.coalesce_summary(connection)
        keys = control_reads.open_key_page(connection, after=after, limit=PAGE_SIZE)
    return render_template(
        "solidq/coalescing.html",
        summary=summary,
        keys=keys,
        after=after,
        next_after=keys[-1].id if len(keys) == PAGE_SIZE else None,
        age=lambda moment: format_age(moment, now),
        now=now,
        done=params.done(),
    )


def concurrency_page() -> str:
    """Concurrency keys with blocked jobs (how many, since when, their semaphore), and every
    semaphore with its lease; two lists, each paged on its own."""
    now = utcnow()
    after = params.text_cursor("after")
    semaphores_after = params.text_cursor("semaphores_after")
    with reading.page() as connection:
        blocked = control_reads.blocked_key_page(connection, after=after, limit=PAGE_SIZE)
        semaphores = control_reads.semaphore_page(
            connection, after=semaphores_after, limit=PAGE_SIZE
        )
        holders = control_reads.running_holders(connection, [entry.key for entry in blocked])
    return render_template(
        "solidq/concurrency.html",
        blocked=blocked,
        holders=holders,
        semaphores=semaphores,
        after=after,
        semaphores_after=semaphores_after,
        next_after=blocked[-1].key if len(blocked) == PAGE_SIZE else None,
        next_semaphores_after=semaphores[-1].key if len(semaphores) == PAGE_SIZE else None,
        age=lambda moment: format_age(moment, now),
        expiry=lambda moment: format_expiry(moment, now),
        now=now,
        done=params.done(),
    )


def processes_page() -> str:
    """The registered processes: kind, name, host, pid, state (running, quieting,
    stopping), heartbeat age, and the Quiet and Stop buttons (:mod:`.process_views`); those
    silent past ``SOLIDQ_PROCESS_ALIVE_THRESHOLD`` marked (a supervisor prunes them)."""
    now = utcnow()
    after = params.int_cursor("after")
    with reading.page() as connection:
        rows = control_reads.process_page(connection, after=after, limit=PAGE_SIZE)
    threshold = get_state().settings.process_alive_threshold
    return render_template(
        "solidq/processes.html",
        rows=rows,
        after=after,
        next_after=rows[-1].id if len(rows) == PAGE_SIZE else None,
        age=lambda moment: format_age(moment, now),
        silent=lambda row: (now - row.last_heartbeat_at).total_seconds() > threshold,
        state=lambda row: state_of(row.command),
        quietable=lambda row: row.command is None and claims_jobs(row.kind),
        now=now,
        done=params.done(),
    )
