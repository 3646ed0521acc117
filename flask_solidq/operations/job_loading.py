"""Loading a claimed job: its definition found by name (or import path), its stored payload
read back into a job, and what the claim says of it (its row, batch, queue, rate-limit usage).
A payload that can't be loaded fails the job before anything runs."""

from __future__ import annotations

import json
import typing as t

from flask_solidq import errors
from flask_solidq.controls.rate_limit import rate_usage
from flask_solidq.definitions import registry
from flask_solidq.definitions.model_references import MissingRecord

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob


def load(claimed: ClaimedJob) -> Job:
    """The job a claimed row holds, with its arguments and counters restored.

    :raises flask_solidq.errors.JobNotFound: its definition can't be loaded.
    :raises flask_solidq.errors.DeserializationError: the stored payload is not a JSON object,
        nests too deeply to load, or an argument can't be loaded.
    :raises ValueError: the stored payload isn't valid JSON.
    """
    try:
        payload = json.loads(claimed.arguments or "{}")
    except RecursionError:
        raise _too_deep() from None
    if type(payload) is not dict:
        raise errors.DeserializationError(
            "The stored payload (solidq_jobs.arguments) must be a JSON object, not"
            f" {_json_kind(payload)}."
        )
    import_path = payload.get("job")
    if import_path is not None and type(import_path) is not str:
        raise errors.DeserializationError(
            "The stored payload's \"job\" (the definition's import path) must be a string,"
            f" not {_json_kind(import_path)}."
        )
    definition = registry.lookup(claimed.class_name, import_path)
    job = definition._blank(claimed.active_job_id or "")
    try:
        job.load_payload(payload)
    except MissingRecord:
        # A collecting job's own arguments are a copy of its first call's: when that call's
        # record is gone, its calls decide (it is skipped; the others run).
        if job.coalesced_as != "collect":
            raise
    except RecursionError:
        raise _too_deep() from None
    job.provider_job_id = claimed.id
    if claimed.rate_limit_key or claimed.rate_limit_charges:
        job._rate_limit_usage = rate_usage.Usage(claimed)
    job.batch_id = claimed.batch_id
    job.queue_name = claimed.queue_name
    job.priority = claimed.priority
    return job


def _too_deep() -> errors.DeserializationError:
    return errors.DeserializationError(
        "The stored payload (solidq_jobs.arguments) nests too deeply to load."
    )


def _json_kind(value: object) -> str:
    """What a JSON value is, for messages; never the value (it may be personal data)."""
    return _JSON_KINDS.get(type(value), type(value).__name__)


_JSON_KINDS = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    type(None): "null",
}
