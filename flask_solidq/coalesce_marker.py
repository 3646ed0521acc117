"""How a stored job says it was opened by coalescing: its payload's first field.

A plain value with no imports of ours, so the controls that must tell a coalesced job from
another (a concurrency conflict never discards a coalesced job's retry) and the operations
that write and start coalesced jobs read it from one place.
"""

from __future__ import annotations

#: The payload field that records how a coalesced job was opened; always written first, so
#: a worker tells a coalesced job by the payload's first characters (see ``MARKER_PREFIX``).
MARKER = "coalesce"
MARKER_PREFIX = '{"coalesce":'


def is_coalesced(payload: str | None) -> bool:
    """Whether a stored payload is a coalesced job's."""
    return (payload or "").startswith(MARKER_PREFIX)
