"""Several processes enqueue into one database at once (SQLite's locking included)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from flask_solidq import models
from tests import support
from tests.support import processes

PROCESSES = 4
JOBS_EACH = 500


@pytest.mark.processes
def test_four_processes_enqueue_two_thousand_jobs_without_an_error(
    app, engine, database_url, tmp_path
):
    go_file = tmp_path / "go"
    workers = [
        processes.start(
            [
                sys.executable,
                "-m",
                "tests.scripts.enqueue_many",
                database_url,
                str(JOBS_EACH),
                str(go_file),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for worker in workers:
            assert worker.stdout.readline().strip() == "ready", worker.stderr.read()
        go_file.touch()
        outcomes = [worker.communicate(timeout=120) for worker in workers]
    finally:
        for worker in workers:
            processes.end(worker)

    for worker, (out, err) in zip(workers, outcomes, strict=True):
        assert worker.returncode == 0, err
        assert out.strip() == "done"
    assert support.count(engine, models.JobRecord) == PROCESSES * JOBS_EACH
    assert support.count(engine, models.ReadyExecution) == PROCESSES * JOBS_EACH
