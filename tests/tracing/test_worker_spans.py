"""A real `flask solidq work` process runs each job in a span whose parent is the span that
enqueued it, in the test's process: same trace, the enqueue's span as parent. Its spans reach
the test through a file (tests/apps/tracing_app.py)."""

from __future__ import annotations

import typing as t

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402

from tests import support  # noqa: E402
from tests.jobs import tracing as jobs  # noqa: E402
from tests.support import runtime as runtime_support  # noqa: E402
from tests.support.tracing import in_memory_spans  # noqa: E402
from tests.support.tracing import read_json_lines  # noqa: E402

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

OUTCOME = "messaging.flask_solidq.job.outcome"
PROVIDER_JOB_ID = "messaging.flask_solidq.job.provider_job_id"


def test_a_worker_runs_each_job_in_a_span_child_of_its_enqueue(
    app, launcher, tmp_path, monkeypatch
):
    spans_path = tmp_path / "spans.jsonl"
    monkeypatch.setenv("SOLIDQ_TEST_SPANS_PATH", str(spans_path))
    with in_memory_spans() as exporter, app.app_context():
        with trace.get_tracer("test").start_as_current_span("request") as request:
            enqueued = [
                jobs.noop.perform_later(1),
                jobs.boom.perform_later(2),
                jobs.limited.perform_later(3),
                jobs.limited.perform_later(4),
            ]
        sends = {
            span.attributes[PROVIDER_JOB_ID]: span
            for span in exporter.get_finished_spans()
            if span.name.endswith(" send")
        }
    launcher.start("--only", "worker", app_module="tests.apps.tracing_app")

    def processed() -> dict[int, dict[str, t.Any]]:
        spans = read_json_lines(spans_path)
        by_job = {span["attributes"][PROVIDER_JOB_ID]: span for span in spans}
        return by_job if len(by_job) == len(enqueued) else {}

    spans = support.wait_until(processed, timeout=30)
    trace_id = f"0x{request.get_span_context().trace_id:032x}"
    for job in enqueued:
        span = spans[job.provider_job_id]
        assert span["name"] == f"{type(job).job_name} process"
        assert span["kind"] == "SpanKind.CONSUMER"
        assert span["context"]["trace_id"] == trace_id
        assert span["parent_id"] == f"0x{sends[job.provider_job_id].context.span_id:016x}"
        assert span["attributes"]["messaging.system"] == "flask_solidq"
        assert span["attributes"]["messaging.message.id"] == job.job_id
        assert span["attributes"]["messaging.destination.name"] == "default"
    noop, boom, first, second = (spans[job.provider_job_id] for job in enqueued)
    assert noop["attributes"][OUTCOME] == "finished"
    assert noop["attributes"]["messaging.flask_solidq.job.executions"] == 1
    assert noop["status"]["status_code"] == "UNSET"
    assert boom["attributes"][OUTCOME] == "failed"
    assert boom["status"] == {"status_code": "ERROR", "description": "ValueError"}
    assert [event["name"] for event in boom["events"]] == ["exception"]
    assert boom["events"][0]["attributes"]["exception.message"] == "boom 2"
    # One limited job ran; its claim deferred the other (which of them depends on the claim).
    limited = sorted([first, second], key=lambda span: span["attributes"][OUTCOME])
    assert [span["attributes"][OUTCOME] for span in limited] == ["deferred", "finished"]
    (event,) = limited[0]["events"]
    assert event["name"] == "rate_limit.deferred"
    assert event["attributes"]["key"] == "tracing_test.limited"
