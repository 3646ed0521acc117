"""The inner session of ``test_test_cleanup.py``: tests that start real processes through the
suite's fixtures, run in a pytest of their own which the outer test then ends in one way or
another. Not collected by the suite (the name doesn't start with ``test_``).

Each test starts a ``flask solidq work --processes 2`` (a supervisor that forks two workers
and a dispatcher) and a server of its own (``python -m http.server``), then appends what it
started to the file named by ``SOLIDQ_TEST_CLEANUP_REPORT``: one JSON line of
``[pid, start time]`` pairs, this pytest process's among them.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading
import typing as t

import pytest

from tests.support import processes
from tests.support import runtime as runtime_support

if t.TYPE_CHECKING:
    import sqlalchemy as sa

    from tests.support.runtime import Launcher

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

#: How long the waiting test waits to be stopped before it fails.
STOP_TIMEOUT = 60.0


def start_time(pid: int) -> int:
    """The process's start time, in clock ticks since boot (with its pid, its identity)."""
    stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


def start_everything(launcher: Launcher, engine: sa.Engine) -> None:
    """Start a worker and a server; report their processes once all are running."""
    work = launcher.start("--processes", "2")
    runtime_support.wait_for_kinds(engine, ["Dispatcher", "Supervisor(fork)", "Worker", "Worker"])
    server = processes.start(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with engine.connect() as connection:
        forked = connection.exec_driver_sql("SELECT pid FROM solidq_processes").scalars().all()
    pids = {os.getpid(), work.pid, server.pid, *forked}
    report = pathlib.Path(os.environ["SOLIDQ_TEST_CLEANUP_REPORT"])
    with report.open("a") as lines:
        lines.write(json.dumps([[pid, start_time(pid)] for pid in sorted(pids)]) + "\n")


def test_passes(launcher, engine):
    start_everything(launcher, engine)


def test_fails(launcher, engine):
    start_everything(launcher, engine)
    pytest.fail("a failing test's processes end too")


def test_waits_to_be_stopped(launcher, engine):
    start_everything(launcher, engine)
    stopped = threading.Event()  # nothing sets it: the outer test stops this pytest instead
    stopped.wait(STOP_TIMEOUT)
    pytest.fail(f"not stopped within {STOP_TIMEOUT}s")
