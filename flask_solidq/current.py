"""``current_job``: the job a worker thread (or ``perform_now``) is performing right now."""

from __future__ import annotations

import contextlib
import contextvars
import typing as t

from werkzeug.local import LocalProxy

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job

_current_job: contextvars.ContextVar[Job] = contextvars.ContextVar("solidq_current_job")

#: The :class:`~flask_solidq.Job` being performed in this thread, with ``job_id``,
#: ``provider_job_id``, ``executions``, ``coalesced_calls`` and ``arguments``. Outside a job,
#: using it raises :class:`RuntimeError`.
current_job: Job = t.cast(
    "Job", LocalProxy(_current_job, unbound_message="Working outside of a flask-solidq job.")
)


@contextlib.contextmanager
def performing(job: Job) -> t.Iterator[None]:
    """Make ``job`` the :data:`current_job` for the length of the block."""
    token = _current_job.set(job)
    try:
        yield
    finally:
        _current_job.reset(token)
