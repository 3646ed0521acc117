"""The spans of a job's life, in this process, on every backend: an enqueue in a span stores
its trace context with the job, a run (``work_off``'s, which performs as a worker's thread
does) is a child of the enqueue, and says how it ended; rate-limit deferrals and coalescing
are events; ``perform_now`` and the test and inline adapters make the same spans."""

from __future__ import annotations

import json
import typing as t

import pytest
import sqlalchemy as sa

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from flask_solidq import models  # noqa: E402
from flask_solidq.testing import perform_enqueued_jobs  # noqa: E402
from flask_solidq.testing import work_off  # noqa: E402
from flask_solidq.tracing import spans as tracing_spans  # noqa: E402
from tests import support  # noqa: E402
from tests.jobs import tracing as jobs  # noqa: E402
from tests.support.tracing import in_memory_spans  # noqa: E402

if t.TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
OUTCOME = tracing_spans.OUTCOME


@pytest.fixture
def exporter() -> t.Iterator[InMemorySpanExporter]:
    with in_memory_spans() as exporter:
        yield exporter


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = named(exporter, name)
    return span


def parent_id(span: ReadableSpan) -> int:
    assert span.parent is not None, f"{span.name} has no parent"
    return span.parent.span_id


def stored_payload(engine: sa.Engine, job_id: int) -> dict[str, t.Any]:
    with engine.connect() as connection:
        text = connection.scalar(sa.select(JOBS.c.arguments).where(JOBS.c.id == job_id))
    return t.cast(dict[str, t.Any], json.loads(text))


def test_an_enqueue_in_a_span_sends_a_producer_span_whose_context_the_job_stores(
    app, engine, exporter
):
    with app.app_context(), trace.get_tracer("test").start_as_current_span("request") as request:
        job = jobs.noop.set(queue="tracing").perform_later(1)
    send = one(exporter, "tracing_test.noop send")
    assert send.kind is SpanKind.PRODUCER
    assert parent_id(send) == request.get_span_context().span_id
    assert send.context.trace_id == request.get_span_context().trace_id
    assert dict(send.attributes or {}) == {
        "messaging.system": "flask_solidq",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": "tracing",
        "messaging.message.id": job.job_id,
        "messaging.flask_solidq.job.name": "tracing_test.noop",
        "messaging.flask_solidq.job.provider_job_id": job.provider_job_id,
        "messaging.flask_solidq.job.enqueued": True,
    }
    payload = stored_payload(engine, job.provider_job_id)
    ids = f"{send.context.trace_id:032x}-{send.context.span_id:016x}"
    assert payload["trace"] == {"traceparent": f"00-{ids}-{send.context.trace_flags:02x}"}
    assert payload["args"] == [1]


def test_a_run_is_a_consumer_span_child_of_its_enqueue_that_says_it_finished(app, engine, exporter):
    with app.app_context():
        with trace.get_tracer("test").start_as_current_span("request"):
            job = jobs.noop.perform_later(1)
        assert len(work_off()) == 1
    send = one(exporter, "tracing_test.noop send")
    process = one(exporter, "tracing_test.noop process")
    assert process.kind is SpanKind.CONSUMER
    assert process.context.trace_id == send.context.trace_id
    assert parent_id(process) == send.context.span_id
    assert dict(process.attributes or {}) == {
        "messaging.system": "flask_solidq",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "default",
        "messaging.message.id": job.job_id,
        "messaging.flask_solidq.job.name": "tracing_test.noop",
        "messaging.flask_solidq.job.provider_job_id": job.provider_job_id,
        "messaging.flask_solidq.job.outcome": "finished",
        "messaging.flask_solidq.job.executions": 1,
    }
    assert process.status.status_code is StatusCode.UNSET
    assert not process.events


def test_a_failed_run_records_its_exception_and_is_an_error(app, exporter):
    with app.app_context():
        with trace.get_tracer("test").start_as_current_span("request"):
            jobs.boom.perform_later("x")
        work_off()
    process = one(exporter, "tracing_test.boom process")
    assert process.attributes[OUTCOME] == "failed"
    assert process.status.status_code is StatusCode.ERROR
    assert process.status.description == "ValueError"
    (event,) = process.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "boom x"
    assert parent_id(process) == one(exporter, "tracing_test.boom send").context.span_id


def test_each_attempt_of_a_retried_job_is_a_child_of_the_one_enqueue(app, engine, exporter):
    with app.app_context():
        with trace.get_tracer("test").start_as_current_span("request"):
            job = jobs.flaky.perform_later("y")
        work_off()
        work_off()  # the retry, due at once
    send = one(exporter, "tracing_test.flaky send")
    first, second = named(exporter, "tracing_test.flaky process")
    assert [parent_id(first), parent_id(second)] == [send.context.span_id] * 2
    assert first.attributes[OUTCOME] == "retried"
    assert first.attributes[tracing_spans.RETRY_WAIT] == 0
    assert first.attributes[tracing_spans.EXECUTIONS] == 1
    assert first.status.status_code is StatusCode.ERROR
    assert [event.name for event in first.events] == ["exception"]
    assert second.attributes[OUTCOME] == "failed"
    assert second.attributes[tracing_spans.EXECUTIONS] == 2
    assert stored_payload(engine, job.provider_job_id)["trace"]["traceparent"].split("-")[2] == (
        f"{send.context.span_id:016x}"
    )


def test_a_claim_deferred_by_a_rate_limit_is_a_deferred_span_with_an_event(app, exporter):
    with app.app_context():
        with trace.get_tracer("test").start_as_current_span("request"):
            first = jobs.limited.perform_later(1)
            second = jobs.limited.perform_later(2)
        assert [job.provider_job_id for job in work_off()] == [first.provider_job_id]
    sends = {
        span.attributes[tracing_spans.PROVIDER_JOB_ID]: span
        for span in named(exporter, "tracing_test.limited send")
    }
    processes = {
        span.attributes[tracing_spans.PROVIDER_JOB_ID]: span
        for span in named(exporter, "tracing_test.limited process")
    }
    assert processes[first.provider_job_id].attributes[OUTCOME] == "finished"
    deferred = processes[second.provider_job_id]
    assert deferred.attributes[OUTCOME] == "deferred"
    assert deferred.kind is SpanKind.CONSUMER
    assert parent_id(deferred) == sends[second.provider_job_id].context.span_id
    (event,) = deferred.events
    assert event.name == "rate_limit.deferred"
    assert event.attributes["key"] == "tracing_test.limited"
    assert event.attributes["until"] > ""


def test_a_run_an_api_told_to_wait_is_deferred_with_an_event(app, exporter):
    with app.app_context():
        with trace.get_tracer("test").start_as_current_span("request"):
            jobs.told_to_wait.perform_later(1)
        work_off()
    process = one(exporter, "tracing_test.told_to_wait process")
    assert process.attributes[OUTCOME] == "deferred"
    assert process.attributes[tracing_spans.EXECUTIONS] == 0  # a deferred run isn't counted
    assert process.status.status_code is StatusCode.UNSET
    (event,) = process.events
    assert event.name == "rate_limit.deferred"
    assert dict(event.attributes or {}) == {"held_at_start": False, "wait": 30.0, "pause": 30.0}
    assert parent_id(process) == one(exporter, "tracing_test.told_to_wait send").context.span_id


def test_coalescing_decisions_are_events_on_the_enqueue_spans(app, exporter):
    with app.app_context():
        with trace.get_tracer("test").start_as_current_span("request"):
            jobs.merged.perform_later(1)
            jobs.merged.perform_later(2)
    opened, joined = named(exporter, "tracing_test.merged send")
    assert [(e.name, dict(e.attributes or {})) for e in opened.events] == [
        ("coalesce", {"status": "created", "key": "tracing_test.merged/one"})
    ]
    assert [(e.name, dict(e.attributes or {})) for e in joined.events] == [
        ("coalesce", {"status": "discarded", "key": "tracing_test.merged/one"})
    ]
    assert joined.attributes[tracing_spans.COALESCE_STATUS] == "discarded"


def test_perform_now_is_a_span_child_of_the_current_one(exporter):
    with trace.get_tracer("test").start_as_current_span("caller") as caller:
        jobs.noop.perform_now(1)
        with pytest.raises(ValueError):
            jobs.boom.perform_now(2)
    finished = one(exporter, "tracing_test.noop process")
    failed = one(exporter, "tracing_test.boom process")
    assert [parent_id(finished), parent_id(failed)] == [caller.get_span_context().span_id] * 2
    assert finished.attributes[OUTCOME] == "finished"
    assert failed.attributes[OUTCOME] == "failed"
    assert failed.status.status_code is StatusCode.ERROR
    assert [event.name for event in failed.events] == ["exception"]


@pytest.mark.parametrize("adapter", ["test", "inline"])
def test_the_test_and_inline_adapters_run_a_job_as_a_child_of_its_enqueue(
    adapter, exporter, tmp_path
):
    app = support.create_app(f"sqlite:///{tmp_path}/unused.db", SOLIDQ_ADAPTER=adapter)
    with app.app_context():
        with trace.get_tracer("test").start_as_current_span("request") as request:
            jobs.noop.perform_later(1)
            if adapter == "test":
                assert not named(exporter, "tracing_test.noop process")
                assert perform_enqueued_jobs() == 1
    send = one(exporter, "tracing_test.noop send")
    process = one(exporter, "tracing_test.noop process")
    assert parent_id(send) == request.get_span_context().span_id
    assert parent_id(process) == send.context.span_id
    assert process.attributes[OUTCOME] == "finished"


def test_without_a_tracer_provider_nothing_is_stored_with_the_job(app, engine):
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    with app.app_context(), trace.get_tracer("test").start_as_current_span("request"):
        job = jobs.noop.perform_later(1)
    assert "trace" not in stored_payload(engine, job.provider_job_id)


def test_a_bulk_enqueue_is_one_send_span_whose_context_every_job_stores(app, exporter):
    with app.app_context():
        with trace.get_tracer("test").start_as_current_span("request"):
            support.solidq.perform_all_later([jobs.noop.new(n) for n in range(3)])
        assert len(work_off()) == 3
    send = one(exporter, "tracing_test.noop send")
    assert send.attributes[tracing_spans.BATCH_SIZE] == 3
    assert tracing_spans.JOB_ID not in send.attributes
    processes = named(exporter, "tracing_test.noop process")
    assert [parent_id(span) for span in processes] == [send.context.span_id] * 3
