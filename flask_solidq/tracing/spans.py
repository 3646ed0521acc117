"""The spans of a job's life, and the only module that imports OpenTelemetry.

* An enqueue (``perform_later``, ``perform_all_later``) runs in a ``PRODUCER`` span
  ``"<job name> send"``; the propagator's fields (W3C ``traceparent``, ``tracestate``, and
  whatever else the app's propagator writes) are stored under the payload's ``"trace"`` key,
  so the trace travels with the job, through its retries, with no column of its own.
* A worker runs a claimed job in a ``CONSUMER`` span ``"<job name> process"`` whose parent is
  that context, and records how the run ended; a claim the job's rate limit deferred makes a
  short one of its own, ended at once with a ``rate_limit.deferred`` event.
* ``perform_now`` (a direct call, the inline adapter's, ``perform_enqueued_jobs``) runs in the
  same span, its parent the stored context when the job carries one, else the current span.

Coalescing decisions are events on the enqueue's span, dropped coalesced calls on the run's.
The tracer is the global tracer provider's, read at each span, so an app (or a test) that
sets its provider later is heard.
"""

from __future__ import annotations

import contextvars
import importlib.metadata
import json
import typing as t

from opentelemetry import propagate
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from opentelemetry.trace import Status
from opentelemetry.trace import StatusCode

from flask_solidq import controls
from flask_solidq import signals
from flask_solidq.definitions import job as job_definitions
from flask_solidq.operations import execute
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.tracing import hooks

if t.TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.util.types import AttributeValue

    from flask_solidq.controls.base import Deferral
    from flask_solidq.definitions.job import Job
    from flask_solidq.operations.outcomes import Outcome
    from flask_solidq.values import ClaimedJob

#: ``messaging.system`` of every span.
SYSTEM = "flask_solidq"

# The attributes, OpenTelemetry's messaging conventions where they have a name for it.
OPERATION_TYPE = "messaging.operation.type"
OPERATION_NAME = "messaging.operation.name"
QUEUE = "messaging.destination.name"
JOB_ID = "messaging.message.id"
BATCH_SIZE = "messaging.batch.message_count"
JOB_NAME = "messaging.flask_solidq.job.name"
PROVIDER_JOB_ID = "messaging.flask_solidq.job.provider_job_id"
EXECUTIONS = "messaging.flask_solidq.job.executions"
OUTCOME = "messaging.flask_solidq.job.outcome"
ENQUEUED = "messaging.flask_solidq.job.enqueued"
COALESCE_STATUS = "messaging.flask_solidq.coalesce.status"
COALESCED_CALLS = "messaging.flask_solidq.coalesce.calls"
RETRY_WAIT = "messaging.flask_solidq.retry.wait"

#: The event of a deferral by a rate limit (at the claim, or by a ``RateLimited`` raised).
RATE_LIMIT_DEFERRED = "rate_limit.deferred"
#: The event of a coalescing decision on an enqueue's span.
COALESCE = "coalesce"
#: The event of a collected call a run skipped (its record gone).
COALESCED_CALL_DROPPED = "coalesce.call_dropped"

#: The outcome of a ``perform_now`` that returned, and of one that raised.
FINISHED = OutcomeKind.FINISHED.value
FAILED = OutcomeKind.FAILED.value

#: The outcomes whose span is an error: the run's error ended it (a discarded job's error
#: was handled by its rule, a deferred one's was an API's 429).
_ERRORS = frozenset({OutcomeKind.FAILED, OutcomeKind.RETRIED})

#: The claimed job a worker's span is running (its row id): its ``perform_now`` is that span.
_running: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "flask_solidq_traced_run", default=None
)


def install() -> None:
    """Fill the hooks of the job's life and listen to the coalescing signals."""
    hooks.AROUND_ENQUEUE.fill(enqueue)
    execute.AROUND_PERFORM.fill(perform_claimed)
    job_definitions.AROUND_PERFORM_NOW.fill(perform_now)
    controls.DEFERRED.fill(deferred)
    signals.coalesce.connect(_coalesced)
    signals.drop_coalesced_call.connect(_call_dropped)


def _version() -> str | None:
    try:
        return importlib.metadata.version("flask-solidq")
    except importlib.metadata.PackageNotFoundError:
        return None


#: The instrumentation's version its tracer is named with.
VERSION = _version()


class _Tracer(t.NamedTuple):
    provider: trace.TracerProvider
    tracer: trace.Tracer


#: flask-solidq's tracer, and the provider it came from.
_cached: _Tracer | None = None


def tracer() -> trace.Tracer | None:
    """flask-solidq's tracer from the global tracer provider as it is now; None while no
    provider is set (OpenTelemetry's API alone, no SDK): then no span is made and nothing is
    stored, at the cost of this call."""
    global _cached
    provider = trace.get_tracer_provider()
    if type(provider) is trace.ProxyTracerProvider:
        return None
    cached = _cached
    if cached is None or cached.provider is not provider:
        cached = _cached = _Tracer(provider, provider.get_tracer(SYSTEM, VERSION))
    return cached.tracer


def enqueue(jobs: t.Sequence[Job], store: t.Callable[[], None]) -> None:
    """Run ``store`` (the enqueue of ``jobs``, at least one) in a ``PRODUCER`` span, each job
    carrying the span's context in its payload."""
    traced_by = tracer()
    if traced_by is None:
        return store()
    names = {type(job).job_name for job in jobs}
    name = next(iter(names)) if len(names) == 1 else SYSTEM
    with traced_by.start_as_current_span(
        f"{name} send", kind=SpanKind.PRODUCER, attributes=_send_attributes(jobs, names)
    ) as span:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        for job in jobs:
            job._trace_context = dict(carrier) if carrier else None
        store()
        if len(jobs) == 1:
            span.set_attributes(_stored_attributes(jobs[0]))


def _send_attributes(jobs: t.Sequence[Job], names: set[str]) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "messaging.system": SYSTEM,
        OPERATION_TYPE: "send",
        OPERATION_NAME: "send",
    }
    queues = {job.queue_name for job in jobs}
    if len(queues) == 1:
        attributes[QUEUE] = next(iter(queues))
    if len(names) == 1:
        attributes[JOB_NAME] = next(iter(names))
    if len(jobs) == 1:
        attributes[JOB_ID] = jobs[0].job_id
    else:
        attributes[BATCH_SIZE] = len(jobs)
    return attributes


def _stored_attributes(job: Job) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {ENQUEUED: bool(job.successfully_enqueued)}
    if job.provider_job_id is not None:
        attributes[PROVIDER_JOB_ID] = job.provider_job_id
    if job.coalesce_status is not None:
        attributes[COALESCE_STATUS] = job.coalesce_status.value
    return attributes


def perform_claimed(claimed: ClaimedJob, run: t.Callable[[], Outcome]) -> Outcome:
    """Run ``run`` (a worker's run of ``claimed``) in a ``CONSUMER`` span child of the
    enqueuer's, and record its outcome there."""
    traced_by = tracer()
    if traced_by is None:
        return run()
    with traced_by.start_as_current_span(
        f"{claimed.class_name} process",
        context=_stored_context(claimed.arguments),
        kind=SpanKind.CONSUMER,
        attributes=_process_attributes(claimed),
    ) as span:
        running = _running.set(claimed.id)
        try:
            outcome = run()
        except BaseException:
            span.set_attribute(OUTCOME, FAILED)
            raise
        finally:
            _running.reset(running)
        _record(span, outcome)
        return outcome


def _process_attributes(claimed: ClaimedJob) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "messaging.system": SYSTEM,
        OPERATION_TYPE: "process",
        OPERATION_NAME: "process",
        QUEUE: claimed.queue_name,
        JOB_NAME: claimed.class_name,
        PROVIDER_JOB_ID: claimed.id,
    }
    if claimed.active_job_id is not None:
        attributes[JOB_ID] = claimed.active_job_id
    return attributes


def _stored_context(payload: str | None) -> Context | None:
    """The context a stored payload's ``"trace"`` carries; None (the current one) without."""
    if not payload or '"trace":' not in payload:
        return None
    try:
        carrier = json.loads(payload).get("trace")
    except (ValueError, AttributeError):
        return None
    return propagate.extract(carrier) if type(carrier) is dict else None


def _record(span: trace.Span, outcome: Outcome) -> None:
    """Say on ``span`` how the run ended: its outcome, attempt, error and deferral."""
    kind = outcome.kind
    span.set_attribute(OUTCOME, kind.value)
    if outcome.job is not None:
        span.set_attribute(EXECUTIONS, outcome.job.executions)
        if outcome.job.coalesced_calls is not None:
            span.set_attribute(COALESCED_CALLS, len(outcome.job.coalesced_calls))
    error = outcome.exception
    if kind is OutcomeKind.DEFERRED:
        span.add_event(RATE_LIMIT_DEFERRED, _deferral_attributes(outcome))
    elif error is not None:
        span.record_exception(error)
    if kind is OutcomeKind.RETRIED and outcome.retry is not None:
        span.set_attribute(RETRY_WAIT, outcome.retry.wait)
    if kind in _ERRORS:
        described = type(error).__qualname__ if error is not None else kind.value
        span.set_status(Status(StatusCode.ERROR, described))


def _deferral_attributes(outcome: Outcome) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {"held_at_start": outcome.held_at_start}
    if outcome.retry is not None:
        attributes["wait"] = outcome.retry.wait
    if outcome.pause is not None:
        attributes["pause"] = outcome.pause.total_seconds()
    return attributes


def perform_now(job: Job, run: t.Callable[[], object]) -> object:
    """Run ``run`` (``job.perform_now()``) in a ``CONSUMER`` span, unless it is the run a
    worker's span holds already."""
    traced_by = tracer()
    if traced_by is None or (
        job.provider_job_id is not None and _running.get() == job.provider_job_id
    ):
        return run()
    name = type(job).job_name
    carrier = job._trace_context
    with traced_by.start_as_current_span(
        f"{name} process",
        context=propagate.extract(carrier) if carrier else None,
        kind=SpanKind.CONSUMER,
        attributes=_performed_attributes(job),
    ) as span:
        try:
            result = run()
        except BaseException:
            span.set_attributes({OUTCOME: FAILED, EXECUTIONS: job.executions})
            raise
        span.set_attributes({OUTCOME: FINISHED, EXECUTIONS: job.executions})
        return result


def _performed_attributes(job: Job) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "messaging.system": SYSTEM,
        OPERATION_TYPE: "process",
        OPERATION_NAME: "process",
        QUEUE: job.queue_name,
        JOB_NAME: type(job).job_name,
        JOB_ID: job.job_id,
    }
    if job.provider_job_id is not None:
        attributes[PROVIDER_JOB_ID] = job.provider_job_id
    return attributes


def deferred(deferrals: list[Deferral]) -> None:
    """Record each job a claim deferred in a ``CONSUMER`` span of its trace, ended at once:
    outcome ``"deferred"``, with a ``rate_limit.deferred`` event naming the budget and when
    the job is looked at again."""
    traced_by = tracer()
    if traced_by is None:
        return
    for deferral in deferrals:
        claimed = deferral.job
        attributes = _process_attributes(claimed)
        attributes[OUTCOME] = OutcomeKind.DEFERRED.value
        span = traced_by.start_span(
            f"{claimed.class_name} process",
            context=_stored_context(claimed.arguments),
            kind=SpanKind.CONSUMER,
            attributes=attributes,
        )
        span.add_event(
            RATE_LIMIT_DEFERRED, {"key": deferral.key, "until": deferral.until.isoformat()}
        )
        span.end()


def _coalesced(sender: object, **payload: t.Any) -> None:
    """A coalescing decision, as an event on the enqueue's span."""
    span = trace.get_current_span()
    if span.is_recording():
        status = payload["status"]
        span.add_event(
            COALESCE, {"status": str(getattr(status, "value", status)), "key": str(payload["key"])}
        )


def _call_dropped(sender: object, **payload: t.Any) -> None:
    """A collected call skipped because its record is gone, as an event on the run's span."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(
            COALESCED_CALL_DROPPED,
            {"call_id": payload["call_id"], "exception": str(payload["exception_class"])},
        )
