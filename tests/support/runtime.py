"""Helpers and fixtures of the runtime tests: `flask solidq work` subprocesses, the table jobs
leave their evidence in, and reading the queue's state.

Worker processes run ``python -m flask --app tests.apps.worker_app solidq work ...``, started
through :mod:`tests.support.processes` (a session of their own, so the whole group, forked
children included, is killed however the test or pytest ends), with the database URL and fast
settings in the environment and their output in a log file.

A module whose tests share one long-running worker (:func:`shared_worker_fixture`) uses the
:func:`shared_queue` fixture instead of ``app``: ``app`` empties ``solidq_processes`` after each
test, which would deregister the shared worker under its feet.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from tests import support
from tests.jobs.worker import RUNS
from tests.support import processes as children

if t.TYPE_CHECKING:
    from flask import Flask

ROOT = pathlib.Path(__file__).resolve().parents[2]

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)
PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)

#: Settings that make processes notice things within a second or two.
FAST_CONFIG: dict[str, t.Any] = {
    "SOLIDQ_PROCESS_HEARTBEAT_INTERVAL": 0.5,
    "SOLIDQ_PROCESS_ALIVE_THRESHOLD": 3,
    "SOLIDQ_SHUTDOWN_TIMEOUT": 5,
    "SOLIDQ_WORKERS": [{"queues": "*", "threads": 3, "processes": 1, "polling_interval": 0.05}],
    "SOLIDQ_DISPATCHERS": [{"polling_interval": 0.2}],
}

PYCACHE = os.path.join(tempfile.gettempdir(), "flask-solidq-test-pycache")

#: How long a `flask solidq work` may take to start (imports, forks, registration).
START_TIMEOUT = 30.0


class WorkProcess:
    """A running ``flask solidq work`` (its supervisor; the children share its process group)."""

    def __init__(
        self,
        database_url: str,
        args: t.Sequence[str],
        *,
        config: dict[str, t.Any] | None = None,
        log_path: pathlib.Path,
        app_module: str = "tests.apps.worker_app",
        prefix: t.Sequence[str] = (),
    ) -> None:
        env = {
            **os.environ,
            # The environment may forbid bytecode caches in the tree; a cache elsewhere saves
            # every worker compiling flask-solidq again.
            "PYTHONPYCACHEPREFIX": PYCACHE,
            "SOLIDQ_TEST_DATABASE_URL": database_url,
            "SOLIDQ_TEST_CONFIG": json.dumps({**FAST_CONFIG, **(config or {})}),
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.log_path = log_path
        self._log = open(log_path, "wb")  # closed in kill()
        self.process = children.start(
            [*prefix, sys.executable, "-m", "flask", "--app", app_module, "solidq", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the supervisor alone."""
        self.process.send_signal(signum)

    def wait(self, timeout: float) -> int:
        """Wait for the supervisor to exit; return its exit code."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"flask solidq work didn't exit within {timeout}s:\n{self.output()}"
            ) from None

    def kill(self) -> None:
        """SIGKILL the supervisor, every process of its group and any child that outlived
        it; reap the supervisor."""
        children.end(self.process)
        self._log.close()

    def output(self) -> str:
        """Everything the process wrote so far."""
        return self.log_path.read_text(errors="replace")


@dataclasses.dataclass
class Launcher:
    """Starts ``flask solidq work`` processes for a test and kills them all afterwards."""

    database_url: str
    directory: pathlib.Path
    #: A command line prefix for every process (e.g. one that runs it in a network namespace).
    prefix: t.Sequence[str] = ()
    started: list[WorkProcess] = dataclasses.field(default_factory=list)

    def start(
        self,
        *args: str,
        config: dict[str, t.Any] | None = None,
        app_module: str = "tests.apps.worker_app",
    ) -> WorkProcess:
        """Start ``flask solidq work *args`` with the fast settings and ``config``."""
        log_path = self.directory / f"work-{len(self.started)}.log"
        process = WorkProcess(
            self.database_url,
            ["work", *args],
            config=config,
            log_path=log_path,
            app_module=app_module,
            prefix=self.prefix,
        )
        self.started.append(process)
        return process

    def kill_all(self) -> None:
        for process in self.started:
            process.kill()


@pytest.fixture
def runs_table(database_url: str) -> t.Iterator[sa.Table]:
    """``solidq_test_runs`` in ``database_url``'s database, emptied after the test."""
    with emptied_table(database_url, RUNS) as table:
        yield table


@contextlib.contextmanager
def emptied_table(database_url: str, table: sa.Table) -> t.Iterator[sa.Table]:
    """A test's own ``table`` in ``database_url``'s database (created if missing), emptied
    afterwards."""
    engine = sa.create_engine(database_url)
    table.create(engine, checkfirst=True)
    try:
        yield table
    finally:
        with engine.begin() as connection:
            connection.execute(table.delete())
        engine.dispose()


@pytest.fixture
def launcher(
    app: Flask, runs_table: sa.Table, database_url: str, tmp_path: pathlib.Path
) -> t.Iterator[Launcher]:
    """Start `flask solidq work` processes on ``app``'s database: ``launcher.start(*args,
    config={...})``. Each is killed (with its whole group) after the test, before ``app``
    empties the tables."""
    launcher = Launcher(database_url, tmp_path)
    try:
        yield launcher
    finally:
        launcher.kill_all()


# Reading the queue's state.


def runs(engine: sa.Engine, job_name: str | None = None) -> list[sa.Row[t.Any]]:
    """The run rows (of ``job_name``'s job), in insertion order."""
    where = [] if job_name is None else [RUNS.c.job_name == job_name]
    return support.rows(engine, RUNS, *where)


def processes(engine: sa.Engine, kind: str | None = None) -> list[sa.Row[t.Any]]:
    """The registered processes (of ``kind``), in id order."""
    where = [] if kind is None else [PROCESSES.c.kind == kind]
    return support.rows(engine, PROCESSES, *where)


def kinds(engine: sa.Engine) -> list[str]:
    """The kinds of the registered processes, sorted."""
    return sorted(row.kind for row in processes(engine))


def wait_for_kinds(engine: sa.Engine, expected: t.Sequence[str], timeout: float = START_TIMEOUT):
    """Wait until exactly the processes ``expected`` (kinds, in any order) are registered."""
    support.wait_until(lambda: kinds(engine) == sorted(expected), timeout=timeout)


def failures(engine: sa.Engine) -> dict[int, dict[str, t.Any]]:
    """job id -> the parsed error of its failed execution."""
    return {row.job_id: json.loads(row.error) for row in support.rows(engine, FAILED)}


def finished_ids(engine: sa.Engine) -> set[int]:
    """The ids of the finished jobs."""
    return {row.id for row in support.rows(engine, JOBS, JOBS.c.finished_at.is_not(None))}


def delete_queue_rows(engine: sa.Engine) -> None:
    """Empty every flask-solidq table but ``solidq_processes``, children first."""
    with engine.begin() as connection:
        for table in reversed(models.TABLES):
            if table is not PROCESSES:
                connection.execute(table.delete())
        connection.execute(RUNS.delete())


# One worker for a whole module.


@dataclasses.dataclass
class SharedQueue:
    """What a test of a shared-worker module works with."""

    app: Flask
    engine: sa.Engine
    worker: WorkProcess

    def enqueue(self, job: t.Any, *args: t.Any, **options: t.Any) -> int:
        """Enqueue ``job(*args)`` with ``set(**options)``; return its job row id."""
        with self.app.app_context():
            target = job.set(**options) if options else job
            return t.cast(int, target.perform_later(*args).provider_job_id)


def shared_worker_fixture(*args: str, config: dict[str, t.Any] | None = None) -> t.Any:
    """A module-scoped fixture, ``shared_worker``: one ``flask solidq work *args`` per backend
    for the tests of a module, ready once all its processes are registered. When the module's
    tests on that backend are done, it must stop on SIGTERM with exit status 0; then its
    group is killed whatever happened."""

    @pytest.fixture(scope="module")
    def shared_worker(
        database_url: str, tmp_path_factory: pytest.TempPathFactory
    ) -> t.Iterator[WorkProcess]:
        engine = sa.create_engine(database_url)
        RUNS.create(engine, checkfirst=True)
        support.delete_all_rows(engine)
        log = tmp_path_factory.mktemp("shared-worker") / "work.log"
        worker = WorkProcess(database_url, ["work", *args], config=config, log_path=log)
        try:
            expected = ["Dispatcher", "Supervisor(fork)"] + ["Worker"] * _worker_count(args)
            wait_for_kinds(engine, expected)
            yield worker
            worker.signal(signal.SIGTERM)
            assert worker.wait(20) == 0, worker.output()
        finally:
            worker.kill()
            support.delete_all_rows(engine)
            with engine.begin() as connection:
                connection.execute(RUNS.delete())
            engine.dispose()

    return shared_worker


def _worker_count(args: t.Sequence[str]) -> int:
    return int(args[args.index("--processes") + 1]) if "--processes" in args else 1


@pytest.fixture
def shared_queue(database_url: str, shared_worker: WorkProcess) -> t.Iterator[SharedQueue]:
    """An app on the shared worker's database; the queue's rows (not the processes) are
    deleted after the test."""
    app = support.create_app(database_url)
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
    assert worker_alive(shared_worker), shared_worker.output()
    yield SharedQueue(app, engine, shared_worker)
    delete_queue_rows(engine)
    dispose_engines(app)


def dispose_engines(app: Flask) -> None:
    """Close the pooled connections of every engine ``app`` has: the app's, the queue's, and
    the one its workers claim through where that is another."""
    with app.app_context():
        state = app.extensions["solidq"]
        engines = {state.engine, *support.db.engines.values()}
        claim_engine = getattr(state, "claim_engine", None)
        if claim_engine is not None:
            engines.add(claim_engine)
        for engine in engines:
            engine.dispose()


def worker_alive(worker: WorkProcess) -> bool:
    return worker.process.poll() is None
