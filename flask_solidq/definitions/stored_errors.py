"""The exception class and message, read back from the error a failed execution stores.

The JSON is written by :mod:`flask_solidq.operations.outcomes`; it is read here, below the
operations, because the status pages, the hand actions and the steps of a dead worker's
jobs all read it.
"""

from __future__ import annotations

import json


def parse_error(error: str | None) -> tuple[str, str]:
    """The exception class and message of a failed execution's ``error`` JSON. Text that
    isn't that JSON (written by hand, or cut short) becomes the message, so status never
    fails on one bad row."""
    try:
        parsed = json.loads(error or "")
    except ValueError:
        return "", error or ""
    if not isinstance(parsed, dict):
        return "", str(parsed)
    return str(parsed.get("exception_class") or ""), str(parsed.get("message") or "")
