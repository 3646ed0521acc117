"""The dashboard's pages and actions. Each view reads through
:mod:`flask_solidq.reads.browse` / :mod:`~flask_solidq.reads.queue_figures`, or acts
through :mod:`~flask_solidq.operations.actions` / :mod:`~flask_solidq.operations.queues` (the
operations the CLI and the Python API use), then renders a template of ``templates/solidq/``.
An action answers with a redirect (303) back to where it came from, saying what it did
(once: :mod:`.flash`)."""

from __future__ import annotations

import datetime as dt
import typing as t

from flask import Blueprint
from flask import abort
from flask import render_template
from flask import request
from flask import url_for
from werkzeug.routing import PathConverter

from flask_solidq.dashboard import activity_views
from flask_solidq.dashboard import batch_views
from flask_solidq.dashboard import control_views
from flask_solidq.dashboard import flash
from flask_solidq.dashboard import params
from flask_solidq.dashboard import process_views
from flask_solidq.dashboard import reading
from flask_solidq.dashboard import recurring_views
from flask_solidq.dashboard import selection_views
from flask_solidq.dashboard import stats_views
from flask_solidq.formatting import format_age
from flask_solidq.formatting import format_duration
from flask_solidq.operations import actions
from flask_solidq.operations import queues
from flask_solidq.operations.processes import process_rows
from flask_solidq.reads import activity
from flask_solidq.reads import browse
from flask_solidq.reads import coalesced_calls
from flask_solidq.reads import job_detail
from flask_solidq.reads import job_stats
from flask_solidq.reads import queue_pages
from flask_solidq.reads import search
from flask_solidq.reads import throughput
from flask_solidq.reads import waiting_reasons
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    import sqlalchemy as sa
    from flask.blueprints import BlueprintSetupState
    from werkzeug.wrappers import Response

#: Jobs per page.
PAGE_SIZE = 50
#: A collecting job's calls per page of its own page.
CALLS_PAGE_SIZE = 50
#: The overview counts the jobs finished this long ago at most.
FINISHED_WINDOW = dt.timedelta(hours=1)
#: The states a job is still moving through: its page keeps refreshing while it's in one.
MOVING = (
    browse.State.SCHEDULED,
    browse.State.DEFERRED,
    browse.State.READY,
    browse.State.CLAIMED,
    browse.State.BLOCKED,
)


def add_routes(blueprint: Blueprint) -> None:
    control_views.add_routes(blueprint)
    process_views.add_routes(blueprint)
    selection_views.add_routes(blueprint)
    batch_views.add_routes(blueprint)
    blueprint.add_url_rule("/", "overview", overview)
    blueprint.add_url_rule("/jobs", "jobs", jobs)
    blueprint.add_url_rule("/jobs/<reference>", "job", job)
    blueprint.add_url_rule(
        # Any text, so a bad id answers 400 with a message (params.job_id), not 404.
        "/jobs/<job_id>/<any(retry, discard, run_now):action>",
        "job_action",
        job_action,
        methods=["POST"],
    )
    blueprint.add_url_rule(
        "/failed/<any(retry, discard):action>", "failed_action", failed_action, methods=["POST"]
    )
    blueprint.record_once(_add_queue_converter)
    blueprint.add_url_rule(
        "/queues/<solidq_queue:queue>/<any(pause, resume):action>",
        "queue_action",
        queue_action,
        methods=["POST"],
        # Werkzeug would otherwise answer a path with "//" (a queue named "/evil", or "a//b")
        # with a redirect to the path with the slashes merged, which names another queue.
        merge_slashes=False,
    )
    recurring_views.add_routes(blueprint)  # after the converter its action's path uses
    activity_views.add_routes(blueprint)  # and its page's
    stats_views.add_routes(blueprint)


class QueueConverter(PathConverter):
    """A queue name in a path: any text, slashes included, even leading or doubled
    (``path`` refuses a leading one), so every queue's name makes a URL of its own."""

    regex = ".+?"
    # Said again: Werkzeug infers it from the regex of a subclass, which has no "/".
    part_isolating = False


def _add_queue_converter(state: BlueprintSetupState) -> None:
    state.app.url_map.converters["solidq_queue"] = QueueConverter


def overview() -> str:
    """A page of the queues (:mod:`flask_solidq.reads.queue_pages`: ``?after=`` the last
    name of the previous page, ``?q=`` a part of the names), each with its jobs in each state,
    latency, paused; jobs finished and failed per minute over the last hour, every queue (a
    chart; ``?window=1d`` or ``7d``: runs per slot over a day or a week, from the job
    statistics); the processes and their heartbeats."""
    now = utcnow()
    since = now - FINISHED_WINDOW
    after = params.text_cursor("after")
    text = params.queue_search_text()
    window = stats_views.window()
    with reading.page() as connection:
        chart = _overview_chart(connection, window, now, since)
        page = queue_pages.queue_page(connection, now, since, after=after, text=text)
        processes = process_rows(connection)
    return render_template(
        "solidq/overview.html",
        **chart,
        counts=page.queues,
        next_after=page.next_after,
        after=after,
        q=text or "",
        page_size=queue_pages.PAGE_SIZE,
        max_query=queue_pages.MAX_QUERY,
        processes=processes,
        age=lambda moment: format_age(moment, now),
        duration=format_duration,
        now=now,
        done=params.done(),
    )


def _overview_chart(
    connection: sa.Connection, window: job_stats.Window, now: dt.datetime, since: dt.datetime
) -> dict[str, object]:
    """The overview chart's template values: the last hour's jobs finished and failed, from
    the jobs themselves; or a day's or a week's runs, from the job statistics."""
    values: dict[str, object] = {"window": window, "windows": list(job_stats.Window)}
    if window is not job_stats.Window.HOUR:
        runs = job_stats.runs_per_slot(connection, window, now)
        values["slot_name"] = stats_views.SLOT_NAMES[window]
        return {**values, "chart": stats_views.runs_chart(runs, window)}
    finished = throughput.finished_per_minute(connection, since, by_queue=False)
    failed = activity.failed(connection, activity.Window(since, slots=60))
    return {
        **values,
        "chart": activity_views.per_minute_chart(since, finished.per_minute, failed),
        "finished": finished,
        "failed_total": sum(failed),
    }


def jobs() -> str:
    """A page of jobs in one state, filtered by queue and job name and searched (an id, a
    ``job_id``, or a text of the arguments or error: :mod:`flask_solidq.reads.search`),
    newest first; with boxes to select rows where the state has actions."""
    try:
        state = browse.State(request.args.get("state", browse.State.FAILED.value))
    except ValueError:
        abort(404)
    where = search.Filter(state, request.args.get("queue") or None, request.args.get("job") or None)
    text = params.search_text()
    before = params.int_cursor("before")
    with reading.page() as connection:
        found = _found(connection, where, text, before)
        # Not for htmx's refreshes, which take only the table.
        refresh = "HX-Request" in request.headers
        queue_names = [] if refresh else search.queue_names(connection)
        job_names = [] if refresh else search.job_names(connection)
    return render_template(
        "solidq/jobs.html",
        page=found.jobs,
        found=found,
        state=state,
        queue=where.queue or "",
        job=where.job or "",
        q=text or "",
        before=before,
        queue_names=queue_names,
        job_names=job_names,
        selectable=selection_views.ACTIONS.get(state, ()),
        selected_field=selection_views.FIELD,
        scan_limit=search.SCAN_LIMIT,
        next_before=found.next_before,
        now=utcnow(),
        done=params.done(),
    )


def _found(
    connection: sa.Connection, where: search.Filter, text: str | None, before: int | None
) -> search.Found:
    """The page: a search's, or the plain list's."""
    if text is not None:
        return search.search(connection, where, text, before=before, limit=PAGE_SIZE)
    page = browse.list_jobs(
        connection, where.state, queue=where.queue, job=where.job, before=before, limit=PAGE_SIZE
    )
    next_before = page[-1].id if len(page) == PAGE_SIZE else None
    return search.Found(page, len(page), bounded=False, next_before=next_before)


def job(reference: str) -> str:
    """One job whole, with the actions its state allows; a collecting job's calls, a page
    at a time (``calls_after``: the last call id of the previous page)."""
    now = utcnow()
    calls_after = params.int_cursor("calls_after")
    with reading.page() as connection:
        detail = job_detail.find_job(connection, params.job_reference(reference))
        reasons = waiting_reasons.reasons(connection, detail, now) if detail else []
        calls = (
            coalesced_calls.calls_page(
                connection, detail.summary.id, after=calls_after, limit=CALLS_PAGE_SIZE
            )
            if detail is not None and detail.calls
            else None
        )
    if detail is None:
        abort(404)
    return render_template(
        "solidq/job.html",
        detail=detail,
        reasons=reasons,
        calls=calls,
        calls_after=calls_after,
        job=detail.summary,
        moving=detail.summary.state in MOVING,
        now=utcnow(),
        done=params.done(),
    )


_JOB_ACTIONS: dict[str, tuple[t.Callable[[sa.Engine, list[int]], int], str]] = {
    "retry": (actions.retry, "Retried"),
    "discard": (actions.discard, "Discarded"),
    "run_now": (actions.run_now, "Made due now:"),
}


def job_action(job_id: str, action: str) -> Response:
    operation, verb = _JOB_ACTIONS[action]
    number = params.job_id(job_id)
    count = operation(reading.engine(), [number])
    message = f"{verb} {count} job{'s' if count != 1 else ''}."
    target = "jobs" if action == "discard" and count else "job"
    if target == "jobs":
        return _back(url_for(".jobs", state=_state_of_form()), message)
    return _back(url_for(".job", reference=number), message)


def _state_of_form() -> str:
    """The list a discarded job's page returns to: its state's, or the failed jobs'."""
    state = request.form.get("state", "")
    return state if state in {member.value for member in browse.State} else "failed"


def failed_action(action: str) -> Response:
    """Retry or discard every failed job, or those of one queue / job name."""
    filters = actions.Filters(
        queue=request.form.get("queue") or None, job=request.form.get("job") or None
    )
    engine = reading.engine()
    if action == "retry":
        count, verb = actions.retry_all(engine, filters), "Retried"
    else:
        count, verb = actions.discard_all(engine, actions.Waiting.FAILED, filters), "Discarded"
    return _back(
        url_for(".jobs", state="failed"), f"{verb} {count} failed job{'s' if count != 1 else ''}."
    )


def queue_action(queue: str, action: str) -> Response:
    queue = params.queue_name(queue)
    engine = reading.engine()
    if action == "pause":
        queues.pause(engine, queue)
    else:
        queues.resume(engine, queue)
    return _back(url_for(".overview"), f"Queue {queue} {action}d.")


def _back(location: str, message: str) -> Response:
    """A 303 to ``location``, a path of the dashboard built with ``url_for`` (never a URL
    from the request: no redirect leaves the dashboard), saying ``message`` there once."""
    return flash.redirect_saying(location, message)
