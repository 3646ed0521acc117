"""CSRF protection for the dashboard's actions, without needing the app's session: a signed
double-submit token, and the browser's word on where a request comes from.

Each response sets a token in a cookie scoped to the dashboard (``SameSite=Strict``,
``HttpOnly``); each form carries it in a hidden field, and htmx sends it as ``X-CSRF-Token``.
The token is a random value signed with a key of the server's (:func:`signing_keys`), so a
cookie planted from a sibling subdomain (which can set cookies for the parent domain) with a
made-up pair is refused: only a token the server issued passes. A POST is refused with 400,
before its view runs, when

- its token is missing, differs from the cookie's (compared in constant time), or isn't
  signed by the server's key;
- it has an ``Origin`` header naming another host than the request's (:func:`same_host`);
- it has a ``Sec-Fetch-Site`` header other than ``same-origin`` or ``none``: a page of
  another origin, including a sibling subdomain (``same-site``), sent it.

Browsers send ``Origin`` with every POST and ``Sec-Fetch-Site`` with every request over
HTTPS (and on localhost); the token is what stops a forged request from a browser that sends
neither.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import typing as t
from urllib.parse import urlsplit

import itsdangerous
from flask import Response
from flask import abort
from flask import current_app
from flask import request

from flask_solidq.state import get_state

COOKIE = "solidq_csrf"
FIELD = "csrf_token"
HEADER = "X-CSRF-Token"
#: The app's setting for a key of the dashboard's own, used before ``SECRET_KEY``.
SECRET_KEY_SETTING = "SOLIDQ_DASHBOARD_SECRET_KEY"
#: Mixed into the signature, so a token is no value the app signs elsewhere with the same key
#: (a Flask session cookie, say) and no such value is a token.
SALT = "flask-solidq.dashboard.csrf"
#: The ``Sec-Fetch-Site`` values of a request the dashboard's own page (or the user) made.
SAME_SITE_FETCHES = frozenset({"same-origin", "none"})

WRONG_TOKEN = "Missing or wrong CSRF token: reload the page and try again."

log = logging.getLogger(__name__)

_ENVIRON_KEY = "flask_solidq.csrf_token"
_process_key: bytes | None = None
_process_key_lock = threading.Lock()


def check_setting(config: t.Mapping[str, object]) -> None:
    """Refuse, when the app starts, a ``SOLIDQ_DASHBOARD_SECRET_KEY`` that can't be a key."""
    value = config.get(SECRET_KEY_SETTING)
    if value is not None and (not isinstance(value, (str, bytes)) or not value):
        raise ValueError(
            f"{SECRET_KEY_SETTING} must be a non-empty str or bytes (it signs the dashboard's"
            f" CSRF tokens), not {type(value).__name__} {value!r}; or leave it unset to use"
            " SECRET_KEY."
        )


def signing_keys() -> list[bytes]:
    """The keys a token may be signed with, the one new tokens are signed with last.

    ``SOLIDQ_DASHBOARD_SECRET_KEY`` when set; else the app's ``SECRET_KEY`` (after its
    ``SECRET_KEY_FALLBACKS``, so tokens signed before a key rotation still pass); else a key
    made for this process, with one warning: its tokens don't survive a restart, and one
    process of the app refuses those of another.
    """
    config = current_app.config
    own = config.get(SECRET_KEY_SETTING)
    if own:
        return [_as_bytes(own)]
    if config.get("SECRET_KEY"):
        keys = [*(config.get("SECRET_KEY_FALLBACKS") or []), config["SECRET_KEY"]]
        return [_as_bytes(key) for key in keys]
    return [_key_of_this_process()]


def _as_bytes(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else key


def _key_of_this_process() -> bytes:
    global _process_key
    with _process_key_lock:
        if _process_key is None:
            _process_key = secrets.token_bytes(32)
            log.warning(
                "The app has no SECRET_KEY (nor %s): the dashboard signs its CSRF tokens with a"
                " key made for this process, so a restart or another process of the app refuses"
                " a page's actions (400; reloading the page fixes it). Set SECRET_KEY.",
                SECRET_KEY_SETTING,
            )
        return _process_key


def _signer() -> itsdangerous.Signer:
    return itsdangerous.Signer(signing_keys(), salt=SALT, digest_method=hashlib.sha256)


def token() -> str:
    """This request's token: the cookie's when the server signed it, or a new one (set on the
    response). Kept in the request's environ, not ``flask.g``: ``g`` lives as long as the app
    context, which a test client (or pytest-flask) may keep open across requests of different
    clients."""
    environ = request.environ
    found = environ.get(_ENVIRON_KEY)
    if isinstance(found, str):
        return found
    cookie = request.cookies.get(COOKIE)
    signer = _signer()
    if cookie is None or not signer.validate(cookie):
        cookie = signer.sign(secrets.token_urlsafe(32)).decode()
    environ[_ENVIRON_KEY] = cookie
    return cookie


def check() -> None:
    """``before_request``: refuse a state-changing request another site may have sent, or
    without a token the server signed."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    _check_sender()
    expected = request.cookies.get(COOKIE)
    given = request.form.get(FIELD) or request.headers.get(HEADER)
    if not expected or not given:
        abort(400, description=WRONG_TOKEN)
    # Compared as bytes: compare_digest refuses str with non-ASCII characters.
    if not hmac.compare_digest(expected.encode(), given.encode()):
        abort(400, description=WRONG_TOKEN)
    if not _signer().validate(given):
        abort(400, description=WRONG_TOKEN)


def _check_sender() -> None:
    origin = request.headers.get("Origin")
    if origin is not None and not same_host(origin, request.host):
        abort(
            400,
            description="Cross-origin request refused: the dashboard's actions are taken only"
            " from its own pages. (Behind a proxy, pass the Host header on to the app.)",
        )
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site not in SAME_SITE_FETCHES:
        abort(
            400,
            description="Cross-site request refused: the dashboard's actions are taken only"
            " from its own pages.",
        )


def same_host(origin: str, host: str) -> bool:
    """Whether the ``Origin`` header ``origin`` names ``host`` (the request's ``Host``): the
    same host name and port, a missing port being the default of the origin's scheme.

    The schemes aren't compared: behind a proxy that ends TLS the app sees http while the
    browser's origin is https, and a page of the same host and port is the same server.
    ``null`` (a sandboxed or file page) and anything unparsable is another host.
    """
    parts = urlsplit(origin)
    default_port = {"http": 80, "https": 443}.get(parts.scheme)
    if default_port is None or not parts.hostname:
        return False
    served = urlsplit(f"//{host}")
    try:
        return (parts.hostname, parts.port or default_port) == (
            served.hostname,
            served.port or default_port,
        )
    except ValueError:  # a port that isn't a number, or out of range
        return False


def set_cookie(response: Response) -> Response:
    """``after_request``: keep the token in the browser."""
    if request.cookies.get(COOKIE) != token():
        response.set_cookie(
            COOKIE,
            token(),
            httponly=True,
            secure=request.is_secure,
            samesite="Strict",
            path=request.script_root + get_state().settings.dashboard_url_prefix,
        )
    return response


def template_context() -> dict[str, object]:
    return {"csrf_token": token, "csrf_field": FIELD, "csrf_header": HEADER}
