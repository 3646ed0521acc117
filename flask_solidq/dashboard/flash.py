"""What an action did, said once on the page its redirect leads to: a flash message kept in a
short-lived signed cookie of the dashboard's own, not in the URL.

In the URL (``?done=...``) the message came back with every reload, bookmark and shared link,
and anyone could write a link that made the dashboard say anything. Flask's ``flash`` needs
the app's session, which a closed blueprint can't count on (the app may have no
``SECRET_KEY``, or a session of another kind). So the redirect sets a cookie scoped to the
dashboard, signed with the key that signs its CSRF tokens (:func:`.csrf.signing_keys`) under
a salt of its own, and valid for :data:`MAX_AGE` seconds; the page that shows the message
deletes it, so a reload doesn't repeat it.
"""

from __future__ import annotations

import hashlib
import typing as t

import itsdangerous
from flask import redirect
from flask import request

from flask_solidq.dashboard import csrf
from flask_solidq.state import get_state

if t.TYPE_CHECKING:
    from werkzeug.wrappers import Response

COOKIE = "solidq_flash"
#: Mixed into the signature, so a flash is no CSRF token (nor any value the app signs) and no
#: token is a flash.
SALT = "flask-solidq.dashboard.flash"
#: Seconds a message waits for its page: a redirect is followed at once, and a message found
#: later (a tab restored the next day) would say something stale.
MAX_AGE = 60
#: The longest message a cookie carries, in characters: a browser drops a cookie over 4 kB
#: (and with it the message), so a message built from a huge name is cut rather than lost.
MAX_MESSAGE = 500

_SHOWN_KEY = "flask_solidq.flash_shown"


def _signer() -> itsdangerous.TimestampSigner:
    return itsdangerous.TimestampSigner(
        csrf.signing_keys(), salt=SALT, digest_method=hashlib.sha256
    )


def _path() -> str:
    return request.script_root + get_state().settings.dashboard_url_prefix


def redirect_saying(location: str, message: str) -> Response:
    """A 303 to ``location`` (a path of the dashboard built with ``url_for``: no redirect
    leaves the dashboard) that says ``message`` on the page it leads to (its first
    :data:`MAX_MESSAGE` characters)."""
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    response = redirect(location, code=303)
    response.set_cookie(
        COOKIE,
        _signer().sign(message.encode()).decode(),
        max_age=MAX_AGE,
        httponly=True,
        secure=request.is_secure,
        samesite="Strict",
        path=_path(),
    )
    return response


def message() -> str | None:
    """The message of the last action, to say on this page (which then forgets it: see
    :func:`forget_shown`); None when there is none, or it is stale or not signed by us."""
    value = request.cookies.get(COOKIE)
    if value is None:
        return None
    request.environ[_SHOWN_KEY] = True
    try:
        return _signer().unsign(value, max_age=MAX_AGE).decode()
    except (itsdangerous.BadSignature, UnicodeDecodeError):
        return None


def forget_shown(response: Response) -> Response:
    """``after_request``: delete the message once a page has read it, so a reload (or the
    page's own refreshes) doesn't say it again. A redirect that sets a new one keeps it."""
    if request.environ.get(_SHOWN_KEY) and COOKIE not in _cookies_set(response):
        response.delete_cookie(COOKIE, path=_path(), samesite="Strict", httponly=True)
    return response


def _cookies_set(response: Response) -> set[str]:
    return {header.split("=", 1)[0] for header in response.headers.getlist("Set-Cookie")}
