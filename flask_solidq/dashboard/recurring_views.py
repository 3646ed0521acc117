"""The dashboard's recurring tasks: the stored tasks with their last and next runs, and "Run
now", which enqueues a task's job once, at once, as its scheduler enqueues a tick
(:func:`flask_solidq.recurring.tasks.enqueue_tick`): the same job, arguments, queue and
priority, recorded in the ledger (at the moment it was asked for), so the page's "Last run"
says it ran.

Only a task this app configures (``SOLIDQ_RECURRING``) can be run: a stored row holds the
job's name and arguments, but its definition and options come from the configuration, as the
scheduler takes them.
"""

from __future__ import annotations

import datetime as dt
import typing as t

from flask import Blueprint
from flask import render_template
from flask import url_for

from flask_solidq.dashboard import flash
from flask_solidq.dashboard import params
from flask_solidq.dashboard import reading
from flask_solidq.formatting import format_age
from flask_solidq.formatting import format_when
from flask_solidq.reads import control_reads
from flask_solidq.recurring import tasks as recurring_tasks
from flask_solidq.recurring.schedule import Schedule
from flask_solidq.state import get_state
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from werkzeug.wrappers import Response

#: Rows per page.
PAGE_SIZE = 50


def add_routes(blueprint: Blueprint) -> None:
    """Add ``.recurring`` and its action ``.recurring_run``."""
    blueprint.add_url_rule("/recurring", "recurring", recurring_page)
    blueprint.add_url_rule(
        # A task's key is any text, slashes included (the queue names' converter).
        "/recurring/<solidq_queue:key>/run",
        "recurring_run",
        run_now,
        methods=["POST"],
        merge_slashes=False,
    )


def recurring_page() -> str:
    """The stored recurring tasks: schedule, last run (from the ledger) and next run (from
    the schedule as stored), and "Run now" on those this app configures."""
    now = utcnow()
    after = params.text_cursor("after")
    with reading.page() as connection:
        rows = control_reads.recurring_page(connection, after=after, limit=PAGE_SIZE)
    return render_template(
        "solidq/recurring.html",
        rows=rows,
        after=after,
        next_after=rows[-1].key if len(rows) == PAGE_SIZE else None,
        next_run=lambda schedule: _next_run(schedule, now),
        age=lambda moment: format_age(moment, now),
        configured={entry.key for entry in get_state().settings.recurring},
        now=now,
        done=params.done(),
    )


def _next_run(schedule: str, now: dt.datetime) -> str:
    """When a stored schedule ticks next, or "?" for one this version can't parse (a row
    written by another version of the app)."""
    try:
        moment = Schedule.parse(schedule).next_time_after(now)
    except ValueError:
        return "?"
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC ({format_when(moment, now)})"


def run_now(key: str) -> Response:
    """Enqueue the task ``key``'s job once now, and say which job (or why none)."""
    back = url_for(".recurring")
    entry = next((entry for entry in get_state().settings.recurring if entry.key == key), None)
    if entry is None:
        return flash.redirect_saying(
            back,
            f"Recurring task {params.shown(key)} is not in this app's SOLIDQ_RECURRING:"
            " nothing enqueued.",
        )
    try:
        task = recurring_tasks.RecurringTask.from_settings(entry)
    except ValueError as exc:
        return flash.redirect_saying(back, f"Nothing enqueued: {exc}")
    job = recurring_tasks.enqueue_tick(reading.engine(), task, utcnow())
    if job is None:
        return flash.redirect_saying(
            back,
            f"Recurring task {key}: nothing enqueued (a control discarded its job, a pending"
            " job of it holds its coalesce key, or enqueuing failed: see the"
            " flask_solidq.scheduler log).",
        )
    name = task.definition.job_name
    return flash.redirect_saying(
        back, f"Recurring task {key}: enqueued job {job.provider_job_id} ({name})."
    )
