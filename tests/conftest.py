"""Fixtures: one suite, every backend.

``database_url`` is parametrized over SQLite (always) and PostgreSQL and MariaDB/MySQL when
``SOLIDQ_TEST_POSTGRES_URL`` / ``SOLIDQ_TEST_MYSQL_URL`` are set: each test that uses it, or
``app``, runs once per backend. Each session works in scratch databases of its own, with the
schema built once; tables are emptied after every test.

With ``SOLIDQ_TEST_PGBOUNCER_URL`` too, the modules of :data:`THROUGH_PGBOUNCER` also run on
``pgbouncer``: PostgreSQL's scratch database, whose apps (the worker processes' too) reach it
through a PgBouncer in transaction pooling, set up for it (see
:func:`tests.support.through_pgbouncer`). Only those: the rest of the suite would take as long
again and test nothing a pooler changes.
"""

from __future__ import annotations

import os
import threading
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from tests import support
from tests.support import processes

if t.TYPE_CHECKING:
    from flask import Flask


#: The test modules (the process tests of PostgreSQL's fast path and wake-ups) that also run
#: through PgBouncer.
THROUGH_PGBOUNCER = {
    "test_pgbouncer",
    "test_worker_processes",
    "test_rate_limit_processes",
    "test_concurrency_processes",
    "test_coalesce_processes",
    "test_shutdown",
    "test_batch_processes",
}


def _backends() -> list[t.Any]:
    backends = [pytest.param("sqlite", id="sqlite")]
    for backend in ("postgres", "mysql"):
        if support.backend_url(backend):
            backends.append(pytest.param(backend, id=backend))
    if support.backend_url("postgres") and support.backend_url("pgbouncer"):
        backends.append(pytest.param("pgbouncer", id="pgbouncer"))
    return backends


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``pgbouncer`` runs of the modules not in :data:`THROUGH_PGBOUNCER`."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        through = callspec is not None and callspec.params.get("database_url") == "pgbouncer"
        module = getattr(item, "module", None)
        name = module.__name__.rsplit(".", 1)[-1] if module is not None else ""
        (dropped if through and name not in THROUGH_PGBOUNCER else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session", params=_backends())
def database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> t.Iterator[str]:
    """The URL of an empty database with the flask-solidq schema, on one backend."""
    backend = request.param
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('sqlite')}/queue.db"
    else:
        server = "postgres" if backend == "pgbouncer" else backend
        url = support.create_scratch_database(t.cast(str, support.backend_url(server)))
    engine = sa.create_engine(url)
    models.metadata.create_all(engine)
    engine.dispose()
    yield support.through_pgbouncer(url) if backend == "pgbouncer" else url
    if backend != "sqlite":
        support.drop_scratch_database(url)


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    """An app whose queue is on ``database_url``; its tables are emptied afterwards."""
    with support.app_emptied_after(database_url) as app:
        yield app


@pytest.fixture
def engine(app: Flask) -> sa.Engine:
    """The queue engine of ``app``."""
    with app.app_context():
        return t.cast(sa.Engine, app.extensions["solidq"].engine)


@pytest.fixture(autouse=True)
def claimers(request: pytest.FixtureRequest) -> None:
    """Register the process ids a module's tests claim as (its ``CLAIMERS``), for each test
    that uses ``app``: a claim only takes jobs for a registered process."""
    process_ids = getattr(request.module, "CLAIMERS", ())
    if process_ids and "app" in request.fixturenames:
        app = request.getfixturevalue("app")
        with app.app_context():
            support.register_claimers(app.extensions["solidq"].engine, process_ids)


@pytest.fixture(autouse=True)
def no_leaked_threads() -> t.Iterator[None]:
    """Fail a test that leaves a thread of its own running."""
    before = set(threading.enumerate())
    yield
    leaked = [
        thread for thread in threading.enumerate() if thread not in before and thread.is_alive()
    ]
    assert not leaked, f"threads left running: {leaked}"


def pytest_configure(config: pytest.Config) -> None:
    """End the processes the tests start however pytest ends (see
    :mod:`tests.support.processes`). With ``SOLIDQ_REQUIRE_ALL_BACKENDS`` set (CI does),
    refuse to run without every backend's URL: a suite that quietly tested SQLite alone would
    pass for the wrong reason."""
    processes.install(xdist_worker=hasattr(config, "workerinput"))
    if os.environ.get("SOLIDQ_REQUIRE_ALL_BACKENDS"):
        missing = [
            name for name, variable in support.BACKEND_URLS.items() if not os.environ.get(variable)
        ]
        if missing:
            raise pytest.UsageError(f"SOLIDQ_REQUIRE_ALL_BACKENDS is set, but no URL for {missing}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With ``SOLIDQ_REQUIRE_ALL_BACKENDS`` set, a skipped test fails the run."""
    if not os.environ.get("SOLIDQ_REQUIRE_ALL_BACKENDS"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped and exitstatus == 0:
        reporter.write_line(
            f"SOLIDQ_REQUIRE_ALL_BACKENDS: {len(skipped)} test(s) skipped", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
