"""Without OpenTelemetry (hidden from the import system, as if not installed) or with it
turned off (``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``), jobs enqueue and run as ever: no
OpenTelemetry module is imported, no hook is filled, nothing is added to a payload."""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.support import processes
from tests.support.runtime import ROOT

SCRIPT = "tests/tracing/absent_script.py"


def run_script(database_url: str, mode: str, **environ: str) -> dict:
    completed = processes.run(
        [sys.executable, SCRIPT, database_url, mode],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            **environ,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.splitlines()[-1])


def test_without_opentelemetry_nothing_is_imported_and_jobs_run_as_ever(app, database_url):
    seen = run_script(database_url, "hidden")
    assert seen["asked"] == ["opentelemetry"]  # looked for once, at init_app
    assert seen["modules"] == []
    assert seen["hooked"] == [False, False, False, False]
    assert seen["payload"] == {"job": "tests.jobs.tracing:noop", "args": [1]}
    assert seen["performed"] == 3  # noop, boom (failed) and one limited; the other deferred


def test_opentelemetry_turned_off_by_its_environment_variable_fills_no_hook(app, database_url):
    pytest.importorskip("opentelemetry.sdk")
    seen = run_script(
        database_url, "disabled", OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="requests, flask_solidq"
    )
    assert "flask_solidq.tracing.spans" not in seen["modules"]
    assert seen["hooked"] == [False, False, False, False]
    assert seen["payload"] == {"job": "tests.jobs.tracing:noop", "args": [1]}
