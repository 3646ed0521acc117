"""CSRF protection for the dashboard's actions, without needing the app's ``SECRET_KEY`` or
session: a double-submit token. Each response sets a random token in a cookie scoped to the
dashboard (``SameSite=Strict``, ``HttpOnly``); each form carries it in a hidden field, and htmx
sends it as ``X-CSRF-Token``. A POST whose token is missing or doesn't match the cookie (in
constant time) is refused with 400, before its view runs. Another site can neither read the
cookie nor make the browser send it (SameSite), so it can't forge a matching pair.
"""

from __future__ import annotations

import hmac
import secrets
import typing as t

from flask import Response
from flask import abort
from flask import request

from flask_solidq.state import get_state

COOKIE = "solidq_csrf"
FIELD = "csrf_token"
HEADER = "X-CSRF-Token"


def token() -> str:
    """This request's token: the cookie's, or a new one (set on the response). Kept in the
    request's environ, not ``flask.g``: ``g`` lives as long as the app context, which a test
    client (or pytest-flask) may keep open across requests of different clients."""
    environ = request.environ
    if _ENVIRON_KEY not in environ:
        environ[_ENVIRON_KEY] = request.cookies.get(COOKIE) or secrets.token_urlsafe(32)
    return t.cast(str, environ[_ENVIRON_KEY])


_ENVIRON_KEY = "flask_solidq.csrf_token"


def check() -> None:
    """``before_request``: refuse a state-changing request without the right token."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    expected = request.cookies.get(COOKIE)
    given = request.form.get(FIELD) or request.headers.get(HEADER)
    if not expected or not given or not hmac.compare_digest(expected, given):
        abort(400, description="Missing or wrong CSRF token: reload the page and try again.")


def set_cookie(response: Response) -> Response:
    """``after_request``: keep the token in the browser."""
    if request.cookies.get(COOKIE) != token():
        response.set_cookie(
            COOKIE,
            token(),
            httponly=True,
            samesite="Strict",
            path=request.script_root + get_state().settings.dashboard_url_prefix,
        )
    return response


def template_context() -> dict[str, t.Any]:
    return {"csrf_token": token, "csrf_field": FIELD, "csrf_header": HEADER}
