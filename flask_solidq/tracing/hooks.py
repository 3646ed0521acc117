"""The hook the adapters run every enqueue through (``perform_later``,
``perform_all_later``), which :mod:`.spans` fills to run it in a ``PRODUCER`` span: the
adapters are above the tracing, so the hook is declared here rather than beside them."""

from __future__ import annotations

import typing as t

from flask_solidq import slots

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job

#: Given the jobs of one enqueue and the enqueue itself, which stores them.
AROUND_ENQUEUE: slots.Hook[t.Callable[[t.Sequence[Job], t.Callable[[], None]], None]] = slots.Hook(
    "flask_solidq.tracing.spans"
)
