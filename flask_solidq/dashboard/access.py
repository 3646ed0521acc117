"""Who may see the dashboard. It shows job arguments, keys and backtraces, so it is closed
unless the app opens it, in this order:

1. a check the app registered with ``@solidq.dashboard_auth`` (``fn() -> bool``, called per
   request inside the request context: Flask-Login's ``current_user.is_admin``, say) decides;
2. else ``SOLIDQ_DASHBOARD_BASIC_AUTH = ("user", "password")`` asks for HTTP Basic
   credentials, compared in constant time;
3. else the app in debug or testing mode may see it from its own machine only: a request from
   a loopback address (``127.0.0.0/8``, ``::1``) for a loopback host name (``localhost``,
   ``*.localhost``, ``127.x.x.x``, ``[::1]``, any port). A page of another site that rebinds
   its DNS name to 127.0.0.1 sends its own name as the Host, and a colleague on the network
   comes from another address: both get 403 (:func:`is_loopback_request`);
4. else every request gets 403, with a line saying how to open it.

Basic auth or a check of the app's opens the dashboard to every host, as in production: the
loopback rule guards only the dashboard that debug mode opened with no check at all.
"""

from __future__ import annotations

import hmac
import ipaddress

from flask import Response
from flask import abort
from flask import current_app
from flask import request

from flask_solidq.state import get_state

CLOSED = (
    "The flask-solidq dashboard is closed: set SOLIDQ_DASHBOARD_BASIC_AUTH = (user, password),"
    " or register a check with @solidq.dashboard_auth."
)
LOOPBACK_ONLY = (
    "The flask-solidq dashboard is open in debug and testing mode only to this machine: to a"
    " request from a loopback address (127.0.0.0/8, ::1) for a loopback host (localhost,"
    " *.localhost, 127.x.x.x, [::1]); this one came from {address} for the host {host}. To open"
    " it to other hosts, set SOLIDQ_DASHBOARD_BASIC_AUTH = (user, password), or register a"
    " check with @solidq.dashboard_auth."
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
        return None if is_loopback_request() else _loopback_only()
    return Response(CLOSED, status=403, mimetype="text/plain")


def is_loopback_request() -> bool:
    """Whether the request came from this machine (its address is a loopback one) and names
    this machine (its Host is a loopback name), whatever the port."""
    return _is_loopback_address(request.remote_addr or "") and _is_loopback_host(request.host)


def _is_loopback_address(text: str) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _is_loopback_host(host: str) -> bool:
    """``localhost``, a name under it, or a loopback address; with a port or without."""
    name = _host_name(host).lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost") or _is_loopback_address(name)


def _host_name(host: str) -> str:
    """The Host header without its port; an IPv6 address without its brackets."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if ":" in host else host


def _loopback_only() -> Response:
    message = LOOPBACK_ONLY.format(address=request.remote_addr, host=repr(request.host)[:80])
    return Response(message, status=403, mimetype="text/plain")


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
