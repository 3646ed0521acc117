"""The app `flask solidq work` runs in the tracing process tests:
``flask --app tests.apps.tracing_app``. It sets OpenTelemetry's SDK up with an exporter that
appends every span to the file ``SOLIDQ_TEST_SPANS_PATH`` names, where the test reads them.

Environment: ``SOLIDQ_TEST_DATABASE_URL``, the queue's database; ``SOLIDQ_TEST_CONFIG``, a JSON
object merged into ``app.config``; ``SOLIDQ_TEST_SPANS_PATH``.
"""

from __future__ import annotations

import json
import os

from flask import Flask
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests import support
from tests.jobs import tracing  # noqa: F401 - the jobs the tests enqueue
from tests.support.tracing import JSONLinesExporter


def create_app() -> Flask:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(
            SimpleSpanProcessor(JSONLinesExporter(os.environ["SOLIDQ_TEST_SPANS_PATH"]))
        )
        trace.set_tracer_provider(provider)
    config = json.loads(os.environ.get("SOLIDQ_TEST_CONFIG") or "{}")
    return support.create_app(os.environ["SOLIDQ_TEST_DATABASE_URL"], **config)
