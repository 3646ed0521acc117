"""OpenTelemetry's SDK for the tracing tests: a tracer provider set for one test, whose spans
an in-memory exporter keeps, and an exporter that appends each span as a JSON line to a file,
for a worker process (tests/apps/tracing_app.py) to hand its spans to the test."""

from __future__ import annotations

import contextlib
import json
import pathlib
import typing as t

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


@contextlib.contextmanager
def global_tracer_provider(exporter: SpanExporter) -> t.Iterator[TracerProvider]:
    """Make a provider exporting to ``exporter`` the global one, and put back the one before
    afterwards (OpenTelemetry lets a process set its provider once: the test resets that)."""
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    trace.set_tracer_provider(provider)
    try:
        yield provider
    finally:
        provider.shutdown()
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved


@contextlib.contextmanager
def in_memory_spans() -> t.Iterator[InMemorySpanExporter]:
    """The spans this process ends while the block runs."""
    exporter = InMemorySpanExporter()
    with global_tracer_provider(exporter):
        yield exporter


class JSONLinesExporter(SpanExporter):
    """Appends each span, as :meth:`ReadableSpan.to_json` writes it on one line, to a file
    (one write a span: the processes of a worker share the file)."""

    def __init__(self, path: str | pathlib.Path) -> None:
        self.path = pathlib.Path(path)

    def export(self, spans: t.Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(json.loads(span.to_json())) + "\n" for span in spans)
        with self.path.open("a", encoding="utf-8") as file:
            file.write(lines)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def read_json_lines(path: pathlib.Path) -> list[dict[str, t.Any]]:
    """The spans a :class:`JSONLinesExporter` wrote to ``path`` so far."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
