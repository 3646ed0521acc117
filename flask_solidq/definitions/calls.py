"""``Call``: one call of a collecting job, as ``perform_calls`` receives it."""

from __future__ import annotations

import dataclasses
import types
import typing as t

from flask_solidq.values import JobArgument
from flask_solidq.values import JSONValue

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job_payloads import StoredJob

#: A call's stored payload, read-only.
JobData = t.Mapping[str, JSONValue]


@dataclasses.dataclass(frozen=True)
class Call:
    """One call joined to a collecting job.

    ``id`` is the stored call's id (None under ``perform_now`` and the inline and test
    adapters), ``args`` and ``kwargs`` its arguments, ``job_data`` the payload stored for it
    (the request's own fields: ``job_id``, ``queue_name``, ``priority``, ``enqueued_at``,
    ``scheduled_at``, with ``args`` and ``kwargs`` as stored), read-only.
    """

    id: int | None
    args: tuple[JobArgument, ...]
    kwargs: dict[str, JobArgument]
    #: The payload, or a function that builds it: a call that was never stored builds it
    #: only when read, so ``perform_now`` with arguments that can't be stored raises only
    #: if ``job_data`` is read (as docs/testing.md says).
    source: JobData | t.Callable[[], JobData] = dataclasses.field(repr=False, compare=False)

    @property
    def arguments(self) -> tuple[JobArgument, ...]:
        """The call's positional arguments (another name for ``args``)."""
        return self.args

    @property
    def job_data(self) -> JobData:
        """The call's stored payload, read-only."""
        source = self.source
        if callable(source):
            source = types.MappingProxyType(dict(source()))
            object.__setattr__(self, "source", source)
        return source


def job_data_of(job: StoredJob) -> dict[str, JSONValue]:
    """The payload stored for a collected call of ``job``: its payload plus the request's
    own fields, which describe the call and not the run (``perform_calls`` runs once, as the
    job that owns the calls)."""
    return {
        **job.payload(),
        "job_id": job.job_id,
        "queue_name": job.queue_name,
        "priority": job.priority,
        "enqueued_at": job.enqueued_at.isoformat() if job.enqueued_at else None,
        "scheduled_at": job.scheduled_at.isoformat() if job.scheduled_at else None,
    }
