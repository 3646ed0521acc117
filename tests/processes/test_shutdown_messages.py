"""Stopping as people expect, read in the log of a real `flask solidq work`: the first Ctrl-C
(SIGINT) or SIGTERM says what it waits for (the running jobs, the shutdown timeout) and how
to stop at once; a second one stops at once and names the jobs that went back to ready; a
worker whose jobs outlive the shutdown timeout names those it puts back; with nothing
running, it says so. Fork and thread mode, on every backend."""

from __future__ import annotations

import os
import signal

import pytest

from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import READY

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

#: Long enough that only an immediate stop ends the test quickly.
LONG_TIMEOUT = 60


def start_long_jobs(app, engine, launcher, *args: str, timeout: float = LONG_TIMEOUT):
    """Two 60 s jobs running under a new `flask solidq work *args`; return it and their ids."""
    with app.app_context():
        ids = [worker_jobs.sleep.perform_later(value, 60).provider_job_id for value in "ab"]
    work = launcher.start(*args, config={"SOLIDQ_SHUTDOWN_TIMEOUT": timeout})
    support.wait_until(
        lambda: len([run for run in runtime_support.runs(engine) if run.finished_at is None]) == 2,
        timeout=30,
    )
    return work, ids


def wait_for_line(work: runtime_support.WorkProcess, text: str) -> str:
    """The first line of ``work``'s output holding ``text``, once there is one."""
    return support.wait_until(
        lambda: next((line for line in work.output().splitlines() if text in line), None)
    )


def ctrl_c(work: runtime_support.WorkProcess, *, terminal: bool) -> None:
    """SIGINT to the supervisor alone, or, as a terminal's Ctrl-C does, to every process of
    its group (its children get it too)."""
    if terminal:
        os.killpg(work.pid, signal.SIGINT)
    else:
        work.signal(signal.SIGINT)


@pytest.mark.parametrize(
    ("mode", "terminal"),
    [("fork", False), ("fork", True), ("thread", False)],
    ids=["fork", "fork-terminal", "thread"],
)
def test_a_second_ctrl_c_stops_at_once_and_names_the_jobs_put_back_to_ready(
    app, engine, launcher, mode, terminal
):
    work, (first, second) = start_long_jobs(app, engine, launcher, "--mode", mode)
    jobs = f"{first} worker_test.sleep, {second} worker_test.sleep"

    ctrl_c(work, terminal=terminal)
    waiting = wait_for_line(work, "received SIGINT: stopping")
    assert waiting.endswith(
        f"waiting up to {LONG_TIMEOUT} s (SOLIDQ_SHUTDOWN_TIMEOUT) for 2 running jobs ({jobs});"
        " press Ctrl-C again to stop now"
    )
    assert " INFO " in waiting
    ctrl_c(work, terminal=terminal)

    assert work.wait(15) == 0, work.output()
    output = work.output()
    assert "received SIGINT again: stopping now; running jobs go back to ready" in output
    (released,) = [line for line in output.splitlines() if "back to ready (" in line]
    assert " WARNING " in released
    assert released.endswith(f"put 2 jobs back to ready (stopped at once): {jobs}")
    assert sorted(row.job_id for row in support.rows(engine, READY)) == [first, second]
    assert support.count(engine, CLAIMED) == 0
    assert runtime_support.processes(engine) == []
    assert [run.finished_at for run in runtime_support.runs(engine)] == [None, None]


def test_a_worker_names_the_jobs_it_puts_back_when_the_shutdown_timeout_runs_out(
    app, engine, launcher
):
    work, (first, second) = start_long_jobs(app, engine, launcher, timeout=1)

    work.signal(signal.SIGTERM)

    assert work.wait(15) == 0, work.output()
    output = work.output()
    assert (
        "waiting up to 1 s (SOLIDQ_SHUTDOWN_TIMEOUT) for 2 running jobs"
        f" ({first} worker_test.sleep, {second} worker_test.sleep);"
        " send SIGTERM again (or SIGQUIT) to stop now"
    ) in output
    (released,) = [line for line in output.splitlines() if "back to ready (" in line]
    assert " WARNING SolidQ Worker worker-" in released
    assert released.endswith(
        "put 2 jobs back to ready (unfinished after SOLIDQ_SHUTDOWN_TIMEOUT, 1 s):"
        f" {first} worker_test.sleep, {second} worker_test.sleep"
    )
    assert sorted(row.job_id for row in support.rows(engine, READY)) == [first, second]


def test_sigquit_stops_at_once_and_names_the_jobs(app, engine, launcher):
    work, (first, second) = start_long_jobs(app, engine, launcher)

    work.signal(signal.SIGQUIT)

    assert work.wait(15) == 0, work.output()
    output = work.output()
    assert "received SIGQUIT: stopping now" in output
    assert (
        f"put 2 jobs back to ready (stopped at once): {first} worker_test.sleep,"
        f" {second} worker_test.sleep"
    ) in output
    assert sorted(row.job_id for row in support.rows(engine, READY)) == [first, second]


def test_with_nothing_running_the_stop_says_so(app, engine, launcher):
    work = launcher.start()
    runtime_support.wait_for_kinds(engine, ["Dispatcher", "Supervisor(fork)", "Worker"])

    work.signal(signal.SIGTERM)

    assert work.wait(15) == 0, work.output()
    output = work.output()
    assert "received SIGTERM: stopping, no jobs are running" in output
    assert "back to ready" not in output
