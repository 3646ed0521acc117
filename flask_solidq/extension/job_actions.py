"""Acting on jobs from Python: ``solidq.retry``, ``discard``, ``run_now``, ``retry_all`` and
``discard_all``, the operations behind ``flask solidq retry/discard/run-now`` and the
dashboard's buttons (:mod:`flask_solidq.operations.actions`)."""

from __future__ import annotations

import dataclasses
import typing as t

import sqlalchemy as sa

from flask_solidq.operations import actions
from flask_solidq.state import get_state

#: A job named by its ``provider_job_id`` or its ``job_id``, or several.
JobReferences: t.TypeAlias = int | str | t.Iterable[int | str]


class JobActions:
    """The part of :class:`~flask_solidq.SolidQ` that acts on jobs already stored."""

    def retry(self, jobs: JobReferences) -> int:
        """Retry failed jobs: each becomes ready again (or blocked, by its concurrency
        limit), keeping its id, its attempt counters and its collected calls; its error goes.
        ``jobs``: a ``provider_job_id`` or ``job_id``, or several. Returns how many were
        retried: a job that isn't failed (any more) is not counted. Requires an app context.
        """
        engine = self._engine()
        return actions.retry(engine, actions.resolve(engine, _references(jobs)))

    def discard(self, jobs: JobReferences) -> int:
        """Delete failed, scheduled, ready or blocked jobs with their executions and
        collected calls (never a running or finished one). Returns how many were discarded.
        Requires an app context."""
        engine = self._engine()
        return actions.discard(engine, actions.resolve(engine, _references(jobs)))

    def run_now(self, jobs: JobReferences) -> int:
        """Make scheduled jobs (rate-limited ones waiting for their slot included) due now.
        Returns how many were moved. Requires an app context."""
        engine = self._engine()
        return actions.run_now(engine, actions.resolve(engine, _references(jobs)))

    # Any: the keywords of actions.Filters (job= may also be a definition), each of its own
    # type, which Filters checks.
    def retry_all(self, **filters: t.Any) -> int:
        """Retry every failed job matching the filters: ``queue=``, ``job=`` (a job name or
        definition), ``error_class=`` (``"ValueError"`` or ``"builtins.ValueError"``),
        ``failed_before=``, ``failed_after=`` (datetimes), ``batch=`` (a batch id: its jobs
        and its children's; a retried job reopens a batch that had finished). In batches of
        500, one transaction each. Returns how many were retried. Requires an app context."""
        return actions.retry_all(self._engine(), _filters(filters))

    # Any: as for retry_all.
    def discard_all(self, state: str | None = None, **filters: t.Any) -> int:
        """Discard every job in ``state`` (``"failed"``, ``"scheduled"``, ``"ready"`` or
        ``"blocked"``; by default ``"failed"``, and with ``batch=`` every scheduled, blocked
        or ready job, so the batch finishes once its running jobs have) matching the filters
        of :meth:`retry_all`. Returns how many were discarded. Requires an app context."""
        chosen = _filters(filters)
        if state is None and chosen.batch is not None:
            return actions.discard_pending(self._engine(), chosen)
        state = "failed" if state is None else state
        choice = actions.Waiting(state) if state in actions.Waiting._value2member_map_ else None
        if choice is None:
            states = ", ".join(repr(member.value) for member in actions.Waiting)
            raise ValueError(f"discard_all(state=) is one of {states}, not {state!r}.")
        return actions.discard_all(self._engine(), choice, chosen)

    def _engine(self) -> sa.Engine:
        state = get_state()
        state.check_tables()
        return state.engine


def _references(jobs: JobReferences) -> list[int | str]:
    if isinstance(jobs, (int, str)):
        return [jobs]
    return list(jobs)


# Any: as for JobActions.retry_all.
def _filters(filters: dict[str, t.Any]) -> actions.Filters:
    """The filters of a ``*_all`` action; ``job=`` may be a definition."""
    known = {field.name for field in dataclasses.fields(actions.Filters)}
    unknown = sorted(set(filters) - known)
    if unknown:
        raise TypeError(f"Unknown filter(s) {unknown}; the filters are {sorted(known)}.")
    job = filters.get("job")
    if job is not None and not isinstance(job, str):
        filters = {**filters, "job": getattr(job, "job_name", job)}
    return actions.Filters(**filters)
