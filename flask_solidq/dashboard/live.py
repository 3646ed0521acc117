"""Live pages: every region of the dashboard that can change refreshes at one interval.

Each such region is an htmx poll (``hx-trigger="{{ refresh_trigger }}"``, marked ``data-live``);
the interval is ``SOLIDQ_DASHBOARD_REFRESH_INTERVAL`` seconds (3 by default), one number for
every page, so an operator reads every page at the same freshness. The header's Live/Paused
button (``static/solidq/dashboard.js``) stops every poll of every page until pressed again; the
browser remembers the choice (``localStorage``), so a paused dashboard stays paused as one
moves from page to page, and reading a long list isn't interrupted by a refresh.

A region refreshes from :func:`refresh_url`: the page's own route built again by ``url_for``
from its parsed arguments, never the request's raw path, so a name with ``#``, ``?`` or ``%``
refreshes its own page and a crafted path can't send the refresh elsewhere.
"""

from __future__ import annotations

import typing as t

from flask import current_app
from flask import request
from flask import url_for

from flask_solidq.timing import to_seconds

#: The Flask config key: seconds between two refreshes of a live region.
SETTING = "SOLIDQ_DASHBOARD_REFRESH_INTERVAL"
#: Its default: fresh enough to watch a queue drain, few enough requests for a busy database.
DEFAULT_SECONDS = 3.0


def check_setting(config: t.Mapping[str, object]) -> None:
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


def refresh_url() -> str:
    """The URL a live region of the page being rendered refreshes from: its endpoint, with
    the route's arguments and the query string's parameters (the filters and cursors the page
    was rendered with) as the request parsed them, each encoded again by ``url_for``. A query
    parameter named as a route argument, or as one of ``url_for``'s own (``endpoint``,
    ``_anchor``...), is left out: the path says the first, and the second isn't the page's."""
    route = request.view_args or {}
    # Any: passed on as url_for's **values, beside keywords of its own (_anchor=...).
    query: dict[str, t.Any] = {
        name: values
        for name, values in request.args.lists()
        if name not in route and name != "endpoint" and not name.startswith("_")
    }
    endpoint = request.endpoint
    if endpoint is None:  # a page being rendered was routed to one
        raise RuntimeError("refresh_url() needs a request routed to an endpoint.")
    return url_for(endpoint, **route, **query)


def template_context() -> dict[str, object]:
    """``refresh_trigger`` for the templates' live regions, ``refresh_seconds`` to say it,
    ``refresh_url()`` for their ``hx-get``."""
    seconds = interval()
    return {
        "refresh_trigger": trigger(seconds),
        "refresh_seconds": f"{seconds:g}",
        "refresh_url": refresh_url,
    }
