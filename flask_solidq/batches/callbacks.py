"""A batch's callbacks: checked and stored as the batch opens, enqueued in the transaction
that finishes it (into its parent when it is a child), announced after that commit."""

from __future__ import annotations

import json
import logging
import typing as t

import sqlalchemy as sa

from flask_solidq import current
from flask_solidq import signals
from flask_solidq import slots
from flask_solidq.definitions import registry
from flask_solidq.definitions import signatures
from flask_solidq.definitions.batches import CALLBACK_KINDS
from flask_solidq.definitions.batches import Batch
from flask_solidq.definitions.job import Job

logger = logging.getLogger("flask_solidq")

#: A callback: a job definition (called with the batch alone) or an unenqueued job (called
#: with the batch, then its own arguments).
Callback = type[Job] | Job | None

#: How a callback job is enqueued: :func:`flask_solidq.operations.enqueue.enqueue`, which
#: fills the slot. An enqueue may finish a batch (a concurrency limit discarding a job of
#: another batch counts it there), and a finished batch enqueues its callbacks: the two call
#: each other, and this slot is where, instead of an import circle.
ENQUEUE: slots.Slot[t.Callable[[sa.Engine, Job], None]] = slots.Slot(
    "flask_solidq.operations.enqueue"
)


def prepare_callbacks(callbacks: t.Mapping[str, Callback]) -> dict[str, str | None]:
    """Each callback as stored in its ``solidq_batches`` column: checked and serialized now,
    so a callback a worker couldn't run fails the ``solidq.batch()`` block, not the finish.

    :raises TypeError: a callback isn't a job definition or job, or can't take the batch as
        its first argument (with its own arguments after it).
    :raises flask_solidq.SerializationError: a callback's argument can't be stored.
    """
    stored: dict[str, str | None] = {}
    for kind, callback in callbacks.items():
        if callback is None:
            stored[kind] = None
            continue
        if isinstance(callback, type) and issubclass(callback, Job):
            job = callback.new()
        elif isinstance(callback, Job):
            job = callback
        else:
            raise TypeError(
                f"solidq.batch({kind}=...) takes a job definition or an unenqueued job"
                f" (SomeJob.new(...)), not {callback!r}."
            )
        definition = type(job)
        _check_takes_the_batch(kind, job)
        stored[kind] = json.dumps(
            {
                "class_name": definition.job_name,
                "queue_name": job.queue_name,
                "priority": job.priority,
                "payload": job.payload(),
            }
        )
    return stored


def _check_takes_the_batch(kind: str, job: Job) -> None:
    """Raise unless a worker could call ``job`` with the batch first, then its own arguments.

    :raises TypeError: it can't; the message says the batch comes first, and how to fix it.
    """
    definition = type(job)
    try:
        definition._check_arguments((_PLACEHOLDER, *job.arguments), job.kwargs)
    except TypeError:
        pass
    else:
        return
    parameters = definition._performer_parameters()
    call = (
        signatures.describe_call(definition._performer(), parameters.signature)
        if parameters is not None
        else definition.job_name
    )
    takes_its_own = parameters is not None and _fits(parameters, job)
    fix = (
        f"give it a first parameter for the batch: {_with_batch_first(call)}"
        if takes_its_own
        else "pass the arguments after the batch with .new(...), e.g."
        f" solidq.batch({kind}={definition.job_name.rsplit('.', 1)[-1]}.new(...))"
    )
    raise TypeError(
        f"solidq.batch({kind}=...): a batch callback is called with the batch as its first"
        f" argument, then its own ({_described(job)}), and job {definition.job_name!r},"
        f" {call}, can't take them: {fix}."
        " Nothing was stored."
    ) from None


def _fits(parameters: signatures.Parameters, job: Job) -> bool:
    """Whether ``job``'s own arguments, without the batch, fit ``parameters``."""
    try:
        parameters.bind(tuple(job.arguments), job.kwargs)
    except TypeError:
        return False
    return True


def _with_batch_first(call: str) -> str:
    """``publish(catalog_id)`` as ``publish(batch, catalog_id)``."""
    name, _, rest = call.partition("(")
    return f"{name}(batch{', ' if rest != ')' else ''}{rest}"


def _described(job: Job) -> str:
    """A callback's own arguments as they read in a call, or "none"."""
    parts = [repr(argument) for argument in job.arguments]
    parts += [f"{name}={value!r}" for name, value in job.kwargs.items()]
    return ", ".join(parts) or "none"


def store(engine: sa.Engine, row: t.Any, batch: Batch, into: current.OpenBatch | None) -> None:
    """Enqueue the callbacks a finished ``batch`` runs, on ``connection``: outside the batch
    (a callback is not part of it, and a coalesced one uses its key outside a batch), into
    its parent (``into``, counted by the caller) when it is a child.

    A callback that can't be built any more (its definition was removed since the batch
    opened, or its key callable raises) is logged at ERROR and skipped: rolling the
    finishing transaction back would undo the outcomes it stores, and retry forever."""
    kinds = ["on_finish", "on_failure" if batch.failed_jobs else "on_success"]
    with current.enqueuing_into(into):
        for kind in sorted(kinds, key=CALLBACK_KINDS.index):
            stored = getattr(row, kind)
            if stored is None:
                continue
            try:
                job = callback_job(json.loads(stored), batch)
            except Exception:
                logger.exception("SolidQ couldn't build the %s callback of batch %s", kind, row.id)
                continue
            ENQUEUE.call(engine, job)  # joins the finishing transaction


def callback_job(stored: dict[str, t.Any], batch: Batch) -> Job:
    """The job a stored callback runs: its definition, with the batch put first."""
    payload = stored["payload"]
    definition = registry.lookup(stored["class_name"], payload.get("job"))
    job = definition.new()
    job.load_payload(payload)
    job.arguments = (batch, *job.arguments)
    job.queue_name = stored["queue_name"]
    job.priority = stored["priority"]
    return job


def announce_finished(batches: t.Iterable[Batch]) -> None:
    """Send ``batch_finish`` for each batch finished (once its callbacks are committed)."""
    for batch in batches:
        signals.send_safely(signals.batch_finish, None, batch=batch, status=batch.status)


#: Stands for the batch when a callback's arguments are checked before the batch exists.
_PLACEHOLDER = object()
