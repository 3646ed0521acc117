"""Live pages: every region of the dashboard that can change refreshes at one interval.

Each such region is an htmx poll (``hx-trigger="{{ refresh_trigger }}"``, marked ``data-live``);
the interval is ``SOLIDQ_DASHBOARD_REFRESH_INTERVAL`` seconds (3 by default), one number for
every page, so an operator reads every page at the same freshness. The header's Live/Paused
button (``static/solidq/dashboard.js``) stops every poll of every page until pressed again; the
browser remembers the choice (``localStorage``), so a paused dashboard stays paused as one
moves from page to page, and reading a long list isn't interrupted by a refresh.
"""

from __future__ import annotations

import typing as t

from flask import current_app

from flask_solidq.timing import to_seconds

#: The Flask config key: seconds between two refreshes of a live region.
SETTING = "SOLIDQ_DASHBOARD_REFRESH_INTERVAL"
#: Its default: fresh enough to watch a queue drain, few enough requests for a busy database.
DEFAULT_SECONDS = 3.0


def check_setting(config: t.Mapping[str, t.Any]) -> None:
    """Refuse, when the app starts, an interval that isn't a positive duration."""
    to_seconds(config.get(SETTING, DEFAULT_SECONDS), name=SETTING)


def interval() -> float:
    """The app's refresh interval, in seconds."""
    return to_seconds(current_app.config.get(SETTING, DEFAULT_SECONDS), name=SETTING)


def trigger(seconds: float) -> str:
    """The ``hx-trigger`` of a region refreshed every ``seconds``: ``every 3s``, or in
    milliseconds when the interval isn't whole seconds (htmx's trigger syntax has no
    decimal point)."""
    milliseconds = max(round(seconds * 1000), 1)
    if milliseconds % 1000 == 0:
        return f"every {milliseconds // 1000}s"
    return f"every {milliseconds}ms"


def template_context() -> dict[str, t.Any]:
    """``refresh_trigger`` for the templates' live regions, ``refresh_seconds`` to say it."""
    seconds = interval()
    return {"refresh_trigger": trigger(seconds), "refresh_seconds": f"{seconds:g}"}
