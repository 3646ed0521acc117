"""The operator's commands on real `flask solidq work` processes: ``flask solidq quiet``
stops a supervisor's workers claiming while their running job finishes; ``flask solidq stop``
ends one worker (not replaced) or a whole supervisor tree gracefully, exiting 0, in fork and
thread mode; and a command reaches a worker on another host (a network and UTS namespace
with a hostname of its own) through the database alone."""

from __future__ import annotations

import os
import signal
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.operations.process_commands import ProcessCommand
from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import fault_proxy
from tests.support import netns
from tests.support import runtime as runtime_support
from tests.support.runtime import PROCESSES
from tests.support.runtime import READY

if t.TYPE_CHECKING:
    import pathlib

    from flask import Flask

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

ALL_KINDS = ["Dispatcher", "Supervisor(fork)", "Worker"]
#: Seconds a command may take to be carried out: the supervisor reads its tree's commands
#: every second, the rest is a signal and a poll; the margin is for a loaded machine.
OBEYED_WITHIN = 15.0


def enqueue_sleep(app: Flask, value: str, seconds: float) -> int:
    with app.app_context():
        return worker_jobs.sleep.perform_later(value, seconds).provider_job_id


def started(engine: sa.Engine, value: str) -> bool:
    return any(run.value == value for run in runtime_support.runs(engine))


def command(app: Flask, verb: str, process: str | int) -> str:
    """Run ``flask solidq <verb> <process>`` on ``app``; return what it printed."""
    result = app.test_cli_runner().invoke(args=["solidq", verb, str(process)])
    assert result.exit_code == 0, result.output
    return result.output


def states(engine: sa.Engine) -> dict[str, str | None]:
    """kind -> command of the registered processes (one of each kind)."""
    return {row.kind: row.command for row in runtime_support.processes(engine)}


def test_quiet_stops_the_workers_claiming_while_their_running_job_finishes_then_stop_ends_one(
    app, engine, launcher
):
    long = enqueue_sleep(app, "long", 3)
    work = launcher.start()
    support.wait_until(lambda: started(engine, "long"), timeout=30)
    runtime_support.wait_for_kinds(engine, ALL_KINDS)
    (supervisor,) = runtime_support.processes(engine, "Supervisor(fork)")

    said = command(app, "quiet", supervisor.id)

    assert "to quiet (with 1 of its processes)" in said
    # The supervisor and its worker are quieting; the dispatcher claims nothing, and runs on.
    assert states(engine) == {"Supervisor(fork)": "quiet", "Worker": "quiet", "Dispatcher": None}
    support.wait_until(
        lambda: "is quiet: it claims no more jobs" in work.output(), timeout=OBEYED_WITHIN
    )
    # A job enqueued now waits, though two of the worker's three threads are idle (it polls
    # every 0.05 s): still ready once the running job has finished.
    waiting = enqueue_sleep(app, "waiting", 0)
    support.wait_until(lambda: runtime_support.finished_ids(engine) == {long}, timeout=20)
    assert [row.job_id for row in support.rows(engine, READY)] == [waiting]
    assert not started(engine, "waiting")

    (worker,) = runtime_support.processes(engine, "Worker")
    said = command(app, "stop", worker.name)

    assert f"Told Worker {worker.name} (id {worker.id}" in said
    support.wait_until(
        lambda: "after the stop command; not replacing it" in work.output(), timeout=OBEYED_WITHIN
    )
    # The supervisor noticed the worker end and started none in its place.
    assert runtime_support.kinds(engine) == ["Dispatcher", "Supervisor(fork)"]
    assert work.output().count("SolidQ started Worker") == 1
    assert work.process.poll() is None
    assert [row.job_id for row in support.rows(engine, READY)] == [waiting]


def test_a_quiet_supervisor_starts_the_worker_replacing_a_dead_one_quiet(app, engine, launcher):
    work = launcher.start()
    runtime_support.wait_for_kinds(engine, ALL_KINDS)
    (supervisor,) = runtime_support.processes(engine, "Supervisor(fork)")
    (dead,) = runtime_support.processes(engine, "Worker")
    command(app, "quiet", supervisor.name)
    support.wait_until(lambda: "is quiet: it claims" in work.output(), timeout=OBEYED_WITHIN)
    waiting = enqueue_sleep(app, "waiting", 0)

    os.kill(dead.pid, signal.SIGKILL)

    def replacement() -> t.Any:
        workers = runtime_support.processes(engine, "Worker")
        return workers[0] if workers and workers[0].id != dead.id else None

    worker = support.wait_until(replacement, timeout=runtime_support.START_TIMEOUT)
    assert worker.command == ProcessCommand.QUIET.value
    support.wait_until(
        lambda: work.output().count("is quiet: it claims") == 2, timeout=OBEYED_WITHIN
    )
    assert [row.job_id for row in support.rows(engine, READY)] == [waiting]
    assert not started(engine, "waiting")


@pytest.mark.parametrize("mode", ["fork", "thread"])
def test_stop_ends_a_supervisor_and_all_its_processes_gracefully_with_exit_0(
    app, engine, launcher, mode
):
    job_id = enqueue_sleep(app, "draining", 1.5)
    work = launcher.start("--mode", mode)
    support.wait_until(lambda: started(engine, "draining"), timeout=30)
    kinds = [kind.replace("fork", mode) for kind in ALL_KINDS]
    runtime_support.wait_for_kinds(engine, kinds)
    (supervisor,) = runtime_support.processes(engine, f"Supervisor({mode})")

    said = command(app, "stop", supervisor.name)

    assert "to stop (with 2 of its processes)" in said
    assert set(states(engine).values()) == {ProcessCommand.STOP.value}
    assert work.wait(15) == 0, work.output()
    # The running job finished: a graceful stop, as on SIGTERM.
    assert runtime_support.finished_ids(engine) == {job_id}
    assert runtime_support.failures(engine) == {}
    assert runtime_support.processes(engine) == []
    assert "was told to stop: stopping" in work.output()
    assert "replacing it" not in work.output()


@pytest.fixture
def other_host() -> t.Iterator[netns.IsolatedHost]:
    reason = netns.available()
    if reason:
        pytest.skip(reason)
    with netns.IsolatedHost() as host:
        yield host


#: The hostname the worker in the namespace runs under.
OTHER_HOSTNAME = "solidq-other-host"


def test_a_command_reaches_a_worker_on_another_host_through_the_database(
    database_url: str,
    app,
    engine,
    runs_table,
    other_host: netns.IsolatedHost,
    tmp_path: pathlib.Path,
):
    # A host of its own: another network namespace (so no signal or socket of this one
    # reaches it: only the database does) and another UTS namespace, with its own hostname.
    prefix = [
        *other_host.exec_prefix,
        "unshare",
        "--uts",
        "sh",
        "-c",
        'hostname "$0" && exec "$@"',
        OTHER_HOSTNAME,
    ]
    with _path_to(database_url, other_host) as url:
        remote = runtime_support.Launcher(url, tmp_path, prefix=prefix)
        try:
            job_id = enqueue_sleep(app, "remote", 1)
            work = remote.start("--only", "worker")
            support.wait_until(lambda: started(engine, "remote"), timeout=30)
            runtime_support.wait_for_kinds(engine, ["Supervisor(fork)", "Worker"])
            hosts = {row.hostname for row in runtime_support.processes(engine)}
            assert hosts == {OTHER_HOSTNAME}
            (worker,) = runtime_support.processes(engine, "Worker")

            said = command(app, "stop", worker.id)

            assert f"on {OTHER_HOSTNAME})" in said
            support.wait_until(
                lambda: runtime_support.kinds(engine) == ["Supervisor(fork)"], timeout=OBEYED_WITHIN
            )
            assert runtime_support.finished_ids(engine) == {job_id}
            command(app, "stop", work_supervisor(engine))
            assert work.wait(15) == 0, work.output()
            assert runtime_support.processes(engine) == []
        finally:
            remote.kill_all()


def work_supervisor(engine: sa.Engine) -> int:
    (row,) = support.rows(engine, PROCESSES, PROCESSES.c.kind == "Supervisor(fork)")
    return int(row.id)


class _path_to:
    """The URL a process in ``host`` reaches the database with: SQLite's file is shared
    across namespaces; a server is reached through a forwarder on this end of the link."""

    def __init__(self, database_url: str, host: netns.IsolatedHost) -> None:
        self.database_url = database_url
        self.host = host
        self.forwarder: fault_proxy.FaultProxy | None = None

    def __enter__(self) -> str:
        if sa.make_url(self.database_url).get_backend_name() == "sqlite":
            return self.database_url
        self.forwarder = fault_proxy.FaultProxy.for_url(
            self.database_url, lifetime=120, listen_host=self.host.gateway
        )
        self.forwarder.__enter__()
        return self.forwarder.url(self.database_url)

    def __exit__(self, *exc_info: t.Any) -> None:
        if self.forwarder is not None:
            self.forwarder.__exit__(*exc_info)
