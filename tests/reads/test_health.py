"""``flask solidq health`` on every backend: exit 0 when a supervisor on the host and each of
its processes heartbeat within the threshold, 1 with one line on stderr saying what is wrong,
3 when the database can't be asked. Processes are registered through the registry's own
``register`` (and silenced by moving their heartbeat back), and once through a real
``flask solidq work``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.operations import processes
from flask_solidq.timing import utcnow
from tests import support
from tests.support import runtime as runtime_support

if t.TYPE_CHECKING:
    from click.testing import Result
    from flask import Flask

PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)
HOST = socket.gethostname()

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher


def health(app: Flask, *args: str) -> Result:
    return app.test_cli_runner().invoke(args=["solidq", "health", *args])


def unhealthy(app: Flask, *args: str) -> Result | None:
    """The result of ``health *args`` when it exits 1, else None."""
    result = health(app, *args)
    return result if result.exit_code == 1 else None


def register(
    engine: sa.Engine, kind: str, name: str, *, pid: int = 4000, supervisor_id: int | None = None
) -> int:
    return processes.register(
        engine, kind=kind, name=name, pid=pid, supervisor_id=supervisor_id, metadata={}
    )


def supervised(engine: sa.Engine, *, pid: int = 4000, prefix: str = "") -> dict[str, int]:
    """A fork supervisor on this host with a worker and a dispatcher: name -> row id."""
    supervisor = register(engine, "Supervisor(fork)", f"{prefix}supervisor-1", pid=pid)
    return {
        "supervisor": supervisor,
        "worker": register(
            engine, "Worker", f"{prefix}worker-1", pid=pid + 1, supervisor_id=supervisor
        ),
        "dispatcher": register(
            engine, "Dispatcher", f"{prefix}dispatcher-1", pid=pid + 2, supervisor_id=supervisor
        ),
    }


def silence(engine: sa.Engine, process_id: int, seconds: float) -> None:
    """Move a process's last heartbeat ``seconds`` into the past."""
    with engine.begin() as connection:
        connection.execute(
            PROCESSES.update()
            .where(PROCESSES.c.id == process_id)
            .values(last_heartbeat_at=utcnow() - dt.timedelta(seconds=seconds))
        )


def move_to_host(engine: sa.Engine, process_ids: t.Iterable[int], hostname: str) -> None:
    with engine.begin() as connection:
        connection.execute(
            PROCESSES.update()
            .where(PROCESSES.c.id.in_(list(process_ids)))
            .values(hostname=hostname)
        )


def test_a_live_supervisor_and_live_processes_exit_0_saying_so(app, engine):
    supervised(engine)

    result = health(app)

    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout == (
        f"healthy: Supervisor(fork) supervisor-1 (pid 4000) on {HOST} and its 2 processes"
        " heartbeat within 300 s\n"
    )


def test_no_supervisor_on_this_host_exits_1_naming_the_hosts_that_have_one(app, engine):
    move_to_host(engine, supervised(engine).values(), "elsewhere")

    result = health(app)

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"unhealthy: no supervisor is registered on host {HOST!r} (supervisors are registered"
        " on: elsewhere); is `flask solidq work` running here, and is --hostname this host's"
        " name as the workers see it?\n"
    )


def test_an_empty_registry_exits_1(app, engine):
    result = health(app)

    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"unhealthy: no supervisor is registered on host {HOST!r}; is `flask solidq work`"
    )


def test_a_silent_process_of_the_supervisor_exits_1_naming_it(app, engine):
    ids = supervised(engine)
    silence(engine, ids["worker"], 400)

    result = health(app)

    assert result.exit_code == 1
    assert result.stderr == (
        f"unhealthy: Worker worker-1 (pid 4001) of supervisor-1 on {HOST} has been silent for"
        " 400 s (threshold 300 s)\n"
    )


def test_a_silent_supervisor_exits_1_naming_it(app, engine):
    ids = supervised(engine)
    silence(engine, ids["supervisor"], 301)

    result = health(app)

    assert result.exit_code == 1
    assert result.stderr == (
        f"unhealthy: Supervisor(fork) supervisor-1 (pid 4000) on {HOST} has been silent for"
        " 301 s (threshold 300 s)\n"
    )


def test_a_restarted_supervisors_old_row_doesnt_count_while_the_new_one_is_alive(app, engine):
    # A container restarted in place: same hostname, same pid 1, the old rows not pruned yet.
    old = supervised(engine, pid=1, prefix="old-")
    for process_id in old.values():
        silence(engine, process_id, 200)
    silence(engine, old["supervisor"], 400)
    supervised(engine, pid=1, prefix="new-")

    result = health(app, "--supervisor-pid", "1")

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("healthy: Supervisor(fork) new-supervisor-1 (pid 1)")


def test_supervisor_pid_checks_only_that_supervisor(app, engine):
    supervised(engine, pid=4000)
    other = supervised(engine, pid=5000, prefix="other-")
    silence(engine, other["worker"], 400)

    assert health(app, "--supervisor-pid", "4000").exit_code == 0
    result = health(app, "--supervisor-pid", "5000")
    assert result.exit_code == 1
    assert "Worker other-worker-1 (pid 5001) of other-supervisor-1" in result.stderr
    assert health(app).exit_code == 1  # both supervisors live: each one's processes count
    missing = health(app, "--supervisor-pid", "6000")
    assert missing.exit_code == 1
    assert f"no supervisor with pid 6000 is registered on host {HOST!r}" in missing.stderr


def test_hostname_checks_another_host(app, engine):
    move_to_host(engine, supervised(engine).values(), "worker-box-7")

    assert health(app).exit_code == 1
    result = health(app, "--hostname", "worker-box-7")
    assert result.exit_code == 0, result.output
    assert "on worker-box-7 and its 2 processes" in result.stdout


def test_threshold_overrides_the_alive_threshold(app, engine):
    ids = supervised(engine)
    silence(engine, ids["dispatcher"], 100)

    assert health(app).exit_code == 0
    result = health(app, "--threshold", "60")
    assert result.exit_code == 1
    assert result.stderr.endswith("has been silent for 100 s (threshold 60 s)\n")
    assert health(app, "--threshold", "0").exit_code == 2  # a usage error


def test_json_prints_the_report_and_keeps_the_exit_status(app, engine):
    ids = supervised(engine)
    silence(engine, ids["worker"], 400)

    result = health(app, "--json")

    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["healthy"] is False
    assert report["message"] == result.stderr.rstrip("\n")
    assert (report["hostname"], report["threshold_seconds"]) == (HOST, 300.0)
    (supervisor,) = report["supervisors"]
    assert (supervisor["kind"], supervisor["name"], supervisor["pid"], supervisor["alive"]) == (
        "Supervisor(fork)",
        "supervisor-1",
        4000,
        True,
    )
    by_name = {process["name"]: process for process in supervisor["processes"]}
    assert set(by_name) == {"worker-1", "dispatcher-1"}
    assert by_name["worker-1"]["alive"] is False
    assert 400 <= by_name["worker-1"]["silent_seconds"] < 410
    assert by_name["dispatcher-1"]["alive"] is True


def test_missing_tables_exit_3_naming_the_fix(tmp_path):
    app = support.create_app(f"sqlite:///{tmp_path}/empty.db")
    try:
        result = health(app)
    finally:
        with app.app_context():
            app.extensions["solidq"].engine.dispose()
            support.db.engines[None].dispose()

    assert result.exit_code == 3
    assert result.stderr.startswith("unknown: ")
    assert "flask solidq install" in result.stderr


def test_an_unreachable_database_exits_3(tmp_path):
    app = support.create_app(f"sqlite:///{tmp_path}/no/such/directory/queue.db")
    try:
        result = health(app)
    finally:
        with app.app_context():
            app.extensions["solidq"].engine.dispose()
            support.db.engines[None].dispose()

    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("unknown: ")
    assert "unable to open database file" in result.stderr
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.processes
def test_a_running_flask_solidq_work_is_healthy_until_a_process_stops_heartbeating(
    app, engine, launcher
):
    work = launcher.start()
    runtime_support.wait_for_kinds(engine, ["Dispatcher", "Supervisor(fork)", "Worker"])
    pid = str(work.pid)

    result = health(app, "--supervisor-pid", pid)
    assert result.exit_code == 0, (result.output, work.output())
    assert f"(pid {pid}) on {HOST} and its 2 processes" in result.stdout

    # A worker frozen in place (SIGSTOP) stops heartbeating (every 0.5 s in the fast settings)
    # but doesn't exit; health, with a threshold under the supervisor's 3 s, sees it before
    # the supervisor prunes it.
    (worker,) = runtime_support.processes(engine, "Worker")
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        stale = support.wait_until(
            lambda: unhealthy(app, "--supervisor-pid", pid, "--threshold", "1.5")
        )
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    assert f"Worker {worker.name} (pid {worker.pid}) of " in stale.stderr

    work.signal(signal.SIGTERM)
    assert work.wait(30) == 0
    result = health(app, "--supervisor-pid", pid)
    assert result.exit_code == 1
    assert f"no supervisor with pid {pid} is registered on host {HOST!r}" in result.stderr
