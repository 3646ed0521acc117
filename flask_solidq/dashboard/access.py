"""Who may see the dashboard. It shows job arguments, keys and backtraces, so it is closed
unless the app opens it, in this order:

1. a check the app registered with ``@solidq.dashboard_auth`` (``fn() -> bool``, called per
   request inside the request context: Flask-Login's ``current_user.is_admin``, say) decides;
2. else ``SOLIDQ_DASHBOARD_BASIC_AUTH = ("user", "password")`` asks for HTTP Basic
   credentials, compared in constant time;
3. else the app in debug or testing mode may see it (a developer's own machine);
4. else every request gets 403, with a line saying how to open it.
"""

from __future__ import annotations

import hmac

from flask import Response
from flask import abort
from flask import current_app
from flask import request

from flask_solidq.state import get_state

CLOSED = (
    "The flask-solidq dashboard is closed: set SOLIDQ_DASHBOARD_BASIC_AUTH = (user, password),"
    " or register a check with @solidq.dashboard_auth."
)


def check() -> Response | None:
    """``before_request``: let the request through, or answer 401/403."""
    state = get_state()
    if state.dashboard_rules:
        if state.dashboard_rules[-1]() is not True:
            abort(403)
        return None
    credentials = state.settings.dashboard_basic_auth
    if credentials is not None:
        return None if _basic_auth_matches(credentials) else _ask_for_credentials()
    if current_app.debug or current_app.testing:
        return None
    return Response(CLOSED, status=403, mimetype="text/plain")


def _basic_auth_matches(credentials: tuple[str, str]) -> bool:
    given = request.authorization
    if given is None or given.type != "basic":
        return False
    user, password = credentials
    # Both compared, whatever the first gives: no early exit to time.
    user_ok = hmac.compare_digest((given.username or "").encode(), user.encode())
    password_ok = hmac.compare_digest((given.password or "").encode(), password.encode())
    return user_ok and password_ok


def _ask_for_credentials() -> Response:
    return Response(
        "Credentials needed.",
        status=401,
        headers={"WWW-Authenticate": 'Basic realm="flask-solidq", charset="UTF-8"'},
        mimetype="text/plain",
    )
