"""The dashboard behind a proxy that ends TLS. Its cookies (the CSRF token, the flash) are
marked ``Secure`` when Flask sees the request as https; behind a proxy, Flask sees the
proxy's plain http unless the app applies Werkzeug's ``ProxyFix``, and the cookies then go
out without ``Secure``. A request that comes over http with the proxy's
``X-Forwarded-Proto: https`` shows that case: one warning per process names the fix
(:data:`FIX`)."""

from __future__ import annotations

import logging
import threading

from flask import request

log = logging.getLogger(__name__)

#: What makes Flask see the scheme (and client and host) the proxy saw.
FIX = (
    "app.wsgi_app = werkzeug.middleware.proxy_fix.ProxyFix(app.wsgi_app, x_for=1, x_proto=1,"
    " x_host=1)"
)

_warned = threading.Event()


def check() -> None:
    """``before_request``: warn, once in this process, when the request came through a proxy
    that says the browser used https while Flask sees http."""
    if _warned.is_set() or not is_https_seen_as_http():
        return
    _warned.set()
    log.warning(
        "A dashboard request came over http with X-Forwarded-Proto: https: the app is behind"
        " a proxy that ends TLS, and Flask doesn't know it, so the dashboard's cookies are"
        " sent without Secure. Apply ProxyFix to the app (one x_... per proxy in front): %s",
        FIX,
    )


def is_https_seen_as_http() -> bool:
    """Whether Flask sees http while the first proxy (the one the browser reached) says the
    browser used https."""
    forwarded = request.headers.get("X-Forwarded-Proto", "")
    return request.scheme == "http" and forwarded.split(",")[0].strip().lower() == "https"


def forget_warning() -> None:
    """Warn again on the next such request (for tests)."""
    _warned.clear()
