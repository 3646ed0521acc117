"""``current_job``: the job performed in this context, as the :class:`~flask_solidq.Job` it
is. The context variable itself is in :mod:`flask_solidq.current`, below the definitions, so
that the job class can set it without the two importing each other."""

from __future__ import annotations

import typing as t

from werkzeug.local import LocalProxy

from flask_solidq import current
from flask_solidq.definitions.job import Job

#: The :class:`~flask_solidq.Job` being performed in this thread, with ``job_id``,
#: ``provider_job_id``, ``executions``, ``coalesced_calls`` and ``arguments``. Outside a job,
#: using it raises :class:`RuntimeError`.
current_job: Job = t.cast(
    "Job", LocalProxy(current.JOB, unbound_message="Working outside of a flask-solidq job.")
)


def running_job() -> Job | None:
    """The job performed in this context, or None."""
    job = current.JOB.get(None)
    return job if isinstance(job, Job) else None
