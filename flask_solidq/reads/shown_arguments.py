"""The argument filter of the app being read for (``SOLIDQ_FILTER_ARGUMENTS``): every read
that shows arguments to people, in the dashboard or the CLI, passes them through it."""

from __future__ import annotations

import typing as t

from flask import current_app
from flask import has_app_context

from flask_solidq import argument_filter

if t.TYPE_CHECKING:
    from flask_solidq.state import SolidQState


def current() -> argument_filter.ArgumentFilter:
    """The current app's filter, compiled when it was set up; the default words' outside an
    app with flask-solidq, so a read made there hides rather than shows."""
    if not has_app_context():
        return argument_filter.DEFAULT
    solidq: SolidQState | None = current_app.extensions.get("solidq")
    return solidq.settings.filter_arguments if solidq is not None else argument_filter.DEFAULT
