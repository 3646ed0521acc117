"""A queue's page: its jobs finished and failed per minute over the last hour and per quarter
hour over the last day, as bar charts with labelled axes (:mod:`.bar_chart`), read by
:mod:`flask_solidq.reads.activity`. The overview draws the last hour of every queue the same
way (:func:`per_minute_chart`).
"""

from __future__ import annotations

import datetime as dt

from flask import Blueprint
from flask import render_template

from flask_solidq.dashboard import bar_chart
from flask_solidq.dashboard import params
from flask_solidq.dashboard import reading
from flask_solidq.reads import activity
from flask_solidq.timing import utcnow

MINUTE = dt.timedelta(minutes=1)
#: The day's chart counts per quarter hour: 96 bars, each wide enough to see.
DAY_SLOT_MINUTES = 15


def add_routes(blueprint: Blueprint) -> None:
    """Add ``.queue`` (its path takes any queue name: the ``solidq_queue`` converter)."""
    blueprint.add_url_rule("/queue/<solidq_queue:queue>", "queue", queue_page, merge_slashes=False)


def per_minute_chart(
    since: dt.datetime, finished: list[int], failed: list[int]
) -> bar_chart.BarChart:
    """An hour's chart, a bar a minute (finished under failed), a time label every 15."""
    series = [bar_chart.Series("finished", finished), bar_chart.Series("failed", failed)]
    return bar_chart.draw(series, since, MINUTE, y_title="Jobs per minute", label_every=15)


def per_quarter_hour_chart(day: activity.Activity) -> bar_chart.BarChart:
    """A day's chart, a bar a quarter hour, a time label every 6 hours."""
    series = [bar_chart.Series("finished", day.finished), bar_chart.Series("failed", day.failed)]
    return bar_chart.draw(series, day.since, day.slot, y_title="Jobs per 15 min", label_every=24)


def queue_page(queue: str) -> str:
    """One queue's last hour and last day, finished and failed."""
    queue = params.queue_name(queue)
    now = utcnow().replace(second=0, microsecond=0) + MINUTE  # whole minutes, now's included
    with reading.page() as connection:
        hour, day = activity.activities(
            connection, now, [(60, 1), (24 * 60 // DAY_SLOT_MINUTES, DAY_SLOT_MINUTES)], queue=queue
        )
    return render_template(
        "solidq/queue.html",
        queue=queue,
        hour=hour,
        day=day,
        hour_chart=per_minute_chart(hour.since, hour.finished, hour.failed),
        day_chart=per_quarter_hour_chart(day),
        done=params.done(),
    )
