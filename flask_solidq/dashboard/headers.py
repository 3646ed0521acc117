"""The security headers of every dashboard response.

The pages load only the dashboard's own files (``static/solidq/``: htmx, ``dashboard.js``,
``dashboard.css``) and have no inline script, style or event handler, so the
Content-Security-Policy allows nothing else: an argument or error that slipped past escaping
still couldn't run. The pages may not be framed (clickjacking a Discard button), their URLs
(queue and job names) aren't sent to other sites, and a file is never sniffed into another
type.

A header the view (or an app's ``after_request`` on the blueprint) already set is kept; an
app that overrides a template with inline code changes the policy in its own
``after_request``, which runs after this one.
"""

from __future__ import annotations

import typing as t

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
}


def add(response: Response) -> Response:
    """``after_request``: set the headers the response doesn't have yet."""
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    return response
