"""The security headers of every dashboard response.

The pages load only the dashboard's own files (``static/solidq/``: htmx, ``dashboard.js``,
``dashboard.css``) and have no inline script, style or event handler, so the
Content-Security-Policy allows nothing else: an argument or error that slipped past escaping
still couldn't run. The pages may not be framed (clickjacking a Discard button), their URLs
(queue and job names) aren't sent to other sites, and a file is never sniffed into another
type.

Every response but a static file's says ``Cache-Control: no-store``: the pages, their htmx
fragments, ``/metrics`` and every answer (an error's, a redirect's) show jobs, arguments and
keys, which no browser cache, history or proxy may keep. The static files (htmx,
``dashboard.js``, ``dashboard.css``, the favicon) hold no data and keep Flask's caching.

Every response also says ``X-SolidQ-Dashboard: 1``: ``dashboard.js`` lets htmx swap in only a
response that says it, so a live region's refresh never swaps in a page from outside the
blueprint (the app's other pages, or a redirect that left the dashboard), whose markup could
carry an ``hx-post`` that the page's CSRF header would then make an action.

A header the view (or an app's ``after_request`` on the blueprint) already set is kept; an
app that overrides a template with inline code changes the policy in its own
``after_request``, which runs after this one.
"""

from __future__ import annotations

import typing as t

from flask import request

if t.TYPE_CHECKING:
    from flask import Response

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        # htmx's refreshes fetch the pages themselves.
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "X-SolidQ-Dashboard": "1",
}

#: What a response showing data says: nothing of it is stored anywhere.
NO_STORE = "no-store"


def add(response: Response) -> Response:
    """``after_request``: set the headers the response doesn't have yet."""
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    if not is_static_file():
        response.headers.setdefault("Cache-Control", NO_STORE)
    return response


def is_static_file() -> bool:
    """Whether the request was for one of the dashboard's static files, the only responses
    a browser may cache."""
    return (request.endpoint or "").endswith(".static")
