"""Run by test_absent.py in a subprocess: an app that enqueues, works off and performs jobs
with OpenTelemetry hidden (``hidden``: a meta path finder refuses it, as if not installed) or
turned off by ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` (``disabled``: installed, with an
SDK set up); prints what it saw as JSON."""

from __future__ import annotations

import json
import sys


class HideOpenTelemetry:
    """Refuses every ``opentelemetry`` module, and remembers being asked."""

    asked: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            self.asked.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def main(database_url: str, mode: str) -> None:
    if mode == "hidden":
        sys.meta_path.insert(0, HideOpenTelemetry())
    else:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())
    import sqlalchemy as sa

    from flask_solidq import controls
    from flask_solidq import models
    from flask_solidq.definitions import job as job_definitions
    from flask_solidq.operations import execute
    from flask_solidq.testing import work_off
    from flask_solidq.tracing import hooks
    from tests import support
    from tests.jobs import tracing as jobs

    app = support.create_app(database_url)
    with app.app_context():
        job = jobs.noop.perform_later(1)
        jobs.boom.perform_later(2)
        support.solidq.perform_all_later([jobs.limited.new(3), jobs.limited.new(4)])
        performed = len(work_off())
        jobs.noop.perform_now(5)
        engine = app.extensions["solidq"].engine
        with engine.connect() as connection:
            payload = connection.scalar(
                sa.select(models.JobRecord.arguments).where(
                    models.JobRecord.id == job.provider_job_id
                )
            )
    hooked = [
        hooks.AROUND_ENQUEUE.function,
        execute.AROUND_PERFORM.function,
        job_definitions.AROUND_PERFORM_NOW.function,
        controls.DEFERRED.function,
    ]
    print(
        json.dumps(
            {
                "asked": HideOpenTelemetry.asked,
                "modules": sorted(
                    name
                    for name in sys.modules
                    if name.startswith("opentelemetry") or name == "flask_solidq.tracing.spans"
                ),
                "hooked": [function is not None for function in hooked],
                "payload": json.loads(payload),
                "performed": performed,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
