"""The stats page: runs, failures, duration and queue latency per job class and per queue
over the last hour, day or week (``?window=1h|1d|7d``), with a chart of the runs per slot,
from :mod:`flask_solidq.reads.job_stats`. The overview's chart takes the same windows
(:func:`overview_chart`): its day and week come from the same statistics."""

from __future__ import annotations

from flask import Blueprint
from flask import render_template
from flask import request

from flask_solidq.dashboard import bar_chart
from flask_solidq.dashboard import params
from flask_solidq.dashboard import reading
from flask_solidq.formatting import format_short_duration
from flask_solidq.reads import job_stats
from flask_solidq.timing import utcnow

#: The chart's time labels, by window: every quarter hour, six hours, day.
LABEL_EVERY = {job_stats.Window.HOUR: 15, job_stats.Window.DAY: 24, job_stats.Window.WEEK: 24}
#: What one bar counts, by window.
SLOT_NAMES = {
    job_stats.Window.HOUR: "minute",
    job_stats.Window.DAY: "15 min",
    job_stats.Window.WEEK: "hour",
}


def add_routes(blueprint: Blueprint) -> None:
    blueprint.add_url_rule("/stats", "stats", stats_page)
    blueprint.add_app_template_filter(format_short_duration, "short_duration")


def window() -> job_stats.Window:
    """The request's ``?window=``: the last hour by default; 400 for any other value."""
    value = request.args.get("window") or job_stats.Window.HOUR.value
    try:
        return job_stats.Window(value)
    except ValueError:
        windows = ", ".join(each.value for each in job_stats.Window)
        params.refuse(f"The window {value!r} is none of {windows}.")


def runs_chart(runs: job_stats.Runs, chosen: job_stats.Window) -> bar_chart.BarChart:
    """Runs that succeeded under those that raised, a bar per slot of ``chosen``."""
    series = [
        bar_chart.Series("finished", runs.succeeded),
        bar_chart.Series("failed", runs.failed),
    ]
    return bar_chart.draw(
        series,
        runs.since,
        runs.slot,
        y_title=f"Runs per {SLOT_NAMES[chosen]}",
        label_every=LABEL_EVERY[chosen],
    )


def stats_page() -> str:
    """Every job class's and queue's figures over the window, and its runs per slot; the
    filters ``?job=`` and ``?queue=`` narrow all three."""
    chosen = window()
    where = job_stats.Filter(job=request.args.get("job") or None, queue=_queue())
    now = utcnow()
    since = chosen.since(now)
    with reading.page() as connection:
        table = job_stats.figures(connection, since, where)
        runs = job_stats.runs_per_slot(connection, chosen, now, where)
    return render_template(
        "solidq/stats.html",
        window=chosen,
        windows=list(job_stats.Window),
        where=where,
        jobs=table.jobs,
        queues=table.queues,
        chart=runs_chart(runs, chosen),
        slot_name=SLOT_NAMES[chosen],
        done=params.done(),
    )


def _queue() -> str | None:
    value = request.args.get("queue") or None
    return None if value is None else params.queue_name(value)
