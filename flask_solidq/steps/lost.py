"""The claims of a dead process whose jobs have step progress: which may resume from their
saved steps (``max_resumptions`` not spent) and, for the others, the failure that says where
they stopped. :func:`flask_solidq.operations.release.resume_steps` acts on what this reads.

The resumptions counted are the stored payload's: a worker writes its run's count as the run
starts from saved progress (:func:`.saves.count_resumption`), so a run killed outright
counts too.
"""

from __future__ import annotations

import dataclasses
import json
import typing as t

import flask
import sqlalchemy as sa

from flask_solidq import errors
from flask_solidq.definitions import registry
from flask_solidq.definitions import step_options
from flask_solidq.definitions import steps
from flask_solidq.definitions.stored_errors import parse_error
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import JOBS
from flask_solidq.state import get_state


@dataclasses.dataclass(frozen=True)
class LostSteps:
    """A lost claim's job with step progress."""

    job_id: int
    #: Its failure's message when its resumptions are spent; None while it may resume.
    spent: str | None
    #: The runs its payload counts (the dead run's, once a save wrote it).
    executions: int | None = None

    def failure(self, error: str) -> str:
        """The failed execution's error: what ``error`` (the death's) says, where the job
        stopped, and in which run."""
        _class, message = parse_error(error)
        message = message.removesuffix("; it may not have started")
        death = f"{message}. " if message else "Its process is gone. "
        data: dict[str, t.Any] = {
            "exception_class": "flask_solidq.ResumptionLimitReached",
            "message": death + str(self.spent),
            "backtrace": [],
        }
        if self.executions is not None:
            data["executions"] = self.executions
        return json.dumps(data, ensure_ascii=False)


def of_claims(connection: sa.Connection, process_ids: t.Collection[int | None]) -> list[LostSteps]:
    """The jobs claimed by ``process_ids`` whose payload has step progress, in id order."""
    ids = [process_id for process_id in process_ids if process_id is not None]
    held: sa.ColumnElement[bool] = CLAIMED.c.process_id.in_(ids)
    if None in process_ids:
        held = sa.or_(held, CLAIMED.c.process_id.is_(None))
    query = (
        sa.select(JOBS.c.id, JOBS.c.class_name, JOBS.c.arguments)
        .join(CLAIMED, CLAIMED.c.job_id == JOBS.c.id)
        .where(held, JOBS.c.arguments.like('%"steps"%'))
        .order_by(JOBS.c.id)
    )
    lost = (_lost(row.id, row.class_name, row.arguments) for row in connection.execute(query))
    return [job for job in lost if job is not None]


def _lost(job_id: int, class_name: str, stored: str | None) -> LostSteps | None:
    try:
        payload = json.loads(stored or "")
        progress = steps.Progress.from_payload(payload)
    except (ValueError, TypeError, AttributeError, RecursionError, errors.SolidQError):
        return None  # malformed: the death's policy decides, as for any job
    if not progress.saved:
        return None
    declared, limit = _limit(class_name, payload.get("job"))
    if limit is None or progress.resumptions < limit:
        return LostSteps(job_id, None)
    executions = payload.get("executions")
    spent = _spent(payload, progress.resumptions, declared, limit)
    return LostSteps(job_id, spent, executions if type(executions) is int else None)


def _limit(class_name: str, import_path: object) -> tuple[bool, int | None]:
    """Whether the job's definition declares ``max_resumptions``, and the limit."""
    default = get_state().settings.max_resumptions if flask.has_app_context() else 100
    try:
        declared = registry.lookup(class_name, import_path if type(import_path) is str else None)
    except errors.JobNotFound:
        return False, default
    limit = declared.max_resumptions
    return (False, default) if limit is step_options.Default.CONFIG else (True, limit)


def _spent(payload: dict[str, t.Any], resumptions: int, declared: bool, limit: int) -> str:
    current = payload["steps"].get("current")
    if current is not None:
        cursor = json.dumps(current[1], ensure_ascii=False)
        where = f"It stopped at step {current[0]!r} (cursor {cursor})"
    else:
        where = f"It stopped after step {payload['steps']['done'][-1]!r}"
    option = "max_resumptions" if declared else "SOLIDQ_MAX_RESUMPTIONS"
    plural = "" if resumptions == 1 else "s"
    return (
        f"{where} after {resumptions} resumption{plural} ({option}={limit}), so it failed"
        " instead of resuming. Its progress is kept: retry the failed job to resume it."
    )
