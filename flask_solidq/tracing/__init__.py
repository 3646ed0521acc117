"""OpenTelemetry tracing of jobs, on when ``opentelemetry-api`` is installed
(``pip install flask-solidq[otel]``), as Celery's and Sidekiq's instrumentations do: an
enqueue runs in a ``PRODUCER`` span and stores its trace context in the job's payload, and a
worker runs the job in a ``CONSUMER`` span whose parent is that context (see
:mod:`.spans`, docs/tracing.md).

Without OpenTelemetry nothing is imported and nothing changes: the hooks the job's life passes
(:mod:`.hooks`) stay empty. ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` naming
``flask_solidq`` turns it off, as it does OpenTelemetry's own instrumentations.
"""

from __future__ import annotations

import os

#: The name ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` turns this tracing off by.
INSTRUMENTATION_NAME = "flask_solidq"

#: Whether this process traces jobs: None until :func:`install` has looked.
_installed: bool | None = None


def install() -> bool:
    """Trace this process's jobs if OpenTelemetry's API can be imported and no
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` turns it off; return whether it does. Looks
    once a process (``SolidQ.init_app`` calls it); the spans go to whatever tracer provider
    the app sets up, or nowhere without one."""
    global _installed
    if _installed is None:
        _installed = not _disabled() and _install_spans()
    return _installed


def _disabled() -> bool:
    names = os.environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "")
    return INSTRUMENTATION_NAME in {name.strip() for name in names.split(",")}


def _install_spans() -> bool:
    try:
        from flask_solidq.tracing import spans
    except ImportError as error:
        if not (error.name or "").startswith("opentelemetry"):
            raise
        return False
    spans.install()
    return True
