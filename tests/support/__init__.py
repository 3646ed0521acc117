"""Shared helpers of the test suite: the app factory, scratch databases, waiting."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import importlib
import os
import pathlib
import sys
import textwrap
import time
import types
import typing as t
import uuid

import sqlalchemy as sa
from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from flask_solidq import SolidQ
from flask_solidq import models
from flask_solidq import signals
from flask_solidq.operations import claim as claim_operation
from flask_solidq.timing import utcnow

db = SQLAlchemy()
solidq = SolidQ()

BACKEND_URLS = {
    "postgres": "SOLIDQ_TEST_POSTGRES_URL",
    "mysql": "SOLIDQ_TEST_MYSQL_URL",
    # A PgBouncer in transaction pooling in front of the PostgreSQL server above.
    "pgbouncer": "SOLIDQ_TEST_PGBOUNCER_URL",
    # Another in session pooling (tests/storage/test_pgbouncer.py).
    "pgbouncer_session": "SOLIDQ_TEST_PGBOUNCER_SESSION_URL",
}


def create_app(database_url: str, **config: t.Any) -> Flask:
    """A small app with Flask-SQLAlchemy and flask-solidq on ``database_url``."""
    app = Flask("solidq_test_app")
    app.config.update(
        {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": database_url,
            "SOLIDQ_DASHBOARD": False,
            **pooler_config(database_url),
            **config,
        }
    )
    db.init_app(app)
    solidq.init_app(app)
    return app


@contextlib.contextmanager
def app_emptied_after(database_url: str, **config: t.Any) -> t.Iterator[Flask]:
    """:func:`create_app`, whose queue tables are emptied and engines disposed afterwards."""
    app = create_app(database_url, **config)
    try:
        yield app
    finally:
        with app.app_context():
            delete_all_rows(app.extensions["solidq"].engine)
            app.extensions["solidq"].dispose()
            db.engines[None].dispose()


def backend_url(backend: str) -> str | None:
    """The server URL a backend's tests use, from its environment variable."""
    return os.environ.get(BACKEND_URLS[backend])


#: The ``application_name`` that marks a test database URL whose app goes through PgBouncer.
THROUGH_PGBOUNCER = "solidq-test-through-pgbouncer"


def through_pgbouncer(direct_url: str) -> str:
    """``direct_url``, marked so that the apps made on it (:func:`create_app`, the worker
    processes' too) reach it through the test PgBouncer, while the test's own engines on the
    URL, which only set up and observe, connect directly."""
    url = sa.make_url(direct_url).update_query_dict({"application_name": THROUGH_PGBOUNCER})
    return url.render_as_string(hide_password=False)


def pooler_config(database_url: str) -> dict[str, t.Any]:
    """An app's settings for ``database_url``: for one :func:`through_pgbouncer` marked, the
    database through PgBouncer, set up for it as an app behind PgBouncer must be (the pooler,
    the direct URL to listen on, and no prepared statements on the app's own engine either);
    nothing otherwise."""
    url = sa.make_url(database_url)
    if url.query.get("application_name") != THROUGH_PGBOUNCER:
        return {}
    bouncer = sa.make_url(t.cast(str, backend_url("pgbouncer")))
    pooled = url.set(host=bouncer.host, port=bouncer.port)
    return {
        "SQLALCHEMY_DATABASE_URI": pooled.render_as_string(hide_password=False),
        "SQLALCHEMY_ENGINE_OPTIONS": {"connect_args": {"prepare_threshold": None}},
        "SOLIDQ_DATABASE_POOLER": "pgbouncer",
        "SOLIDQ_DATABASE_LISTEN_URL": database_url,
    }


def create_scratch_database(server_url: str) -> str:
    """Create an empty database on the server of ``server_url``; return its URL. Every test
    session gets its own, so suites that run at once never see each other's rows."""
    url = sa.make_url(server_url)
    name = f"solidq_test_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    engine.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


def drop_scratch_database(database_url: str) -> None:
    """Drop a database :func:`create_scratch_database` made."""
    url = sa.make_url(database_url)
    server = url.set(database="postgres" if url.get_backend_name() == "postgresql" else "")
    engine = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        if url.get_backend_name() == "postgresql":
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {url.database} WITH (FORCE)")
        else:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {url.database}")
    engine.dispose()


def delete_all_rows(engine: sa.Engine) -> None:
    """Empty every flask-solidq table, children first."""
    with engine.begin() as connection:
        for table in reversed(models.TABLES):
            connection.execute(table.delete())


def register_claimers(engine: sa.Engine, process_ids: t.Iterable[int]) -> None:
    """Register worker rows with exactly ``process_ids`` (those not registered yet), for tests
    that claim as a process of their own choosing: a claim only takes jobs for a registered
    process."""
    now = utcnow()
    processes = models.ProcessRecord.__table__
    with engine.begin() as connection:
        known = set(connection.scalars(sa.select(processes.c.id)))
        process_ids = [process_id for process_id in process_ids if process_id not in known]
        if not process_ids:
            return
        connection.execute(
            processes.insert(),
            [
                {
                    "id": process_id,
                    "kind": "worker",
                    "name": f"claimer-{process_id}",
                    "pid": process_id,
                    "hostname": "test",
                    "last_heartbeat_at": now,
                    "created_at": now,
                }
                for process_id in process_ids
            ],
        )


def claim_everything(engine: sa.Engine, process_id: int, limit: int = 20) -> t.Any:
    """One claim of up to ``limit`` ready jobs of every queue, as ``process_id`` (registered
    first): the controls admit or defer them as a worker's claim does."""
    register_claimers(engine, [process_id])
    return claim_operation.claim_batch(
        engine, claim_operation.QueueSelector(("*",)), limit, process_id
    )


@contextlib.contextmanager
def releases() -> t.Iterator[list[dict[str, t.Any]]]:
    """Collect the payloads of the ``release_blocked`` signals sent inside the block."""
    sent: list[dict[str, t.Any]] = []

    def receiver(sender: t.Any, **payload: t.Any) -> None:
        sent.append(payload)

    with signals.release_blocked.connected_to(receiver):
        yield sent


def make_due(engine: sa.Engine, *job_ids: int) -> None:
    """Move the scheduled executions of ``job_ids`` one second into the past."""
    scheduled = models.ScheduledExecution.__table__
    with engine.begin() as connection:
        connection.execute(
            scheduled.update()
            .where(scheduled.c.job_id.in_(job_ids))
            .values(scheduled_at=utcnow() - dt.timedelta(seconds=1))
        )


def wait_until(
    predicate: t.Callable[[], t.Any], *, timeout: float = 10.0, interval: float = 0.02
) -> t.Any:
    """Poll ``predicate`` until it returns something truthy, and return that; fail the test
    with AssertionError when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {predicate!r}")
        time.sleep(interval)


def rows(
    engine: sa.Engine, table: sa.Table | type[models.Base], *where: t.Any
) -> list[sa.Row[t.Any]]:
    """Every row of ``table`` (a Table or a model class) matching ``where``, ordered by id."""
    table = getattr(table, "__table__", table)
    with engine.connect() as connection:
        return list(connection.execute(sa.select(table).where(*where).order_by(table.c.id)))


def count(engine: sa.Engine, table: sa.Table | type[models.Base]) -> int:
    """How many rows ``table`` holds."""
    table = getattr(table, "__table__", table)
    with engine.connect() as connection:
        return int(connection.scalar(sa.select(sa.func.count()).select_from(table)) or 0)


def redeclare(monkeypatch: t.Any, definition: t.Any, **changes: t.Any) -> None:
    """A deploy that changes what ``definition`` declares, for this test: ``changes`` replace
    fields of its declarations object (``coalesce=``, ``concurrency_limit=None``...; see
    flask_solidq.definitions.declared.Declared), as a decorator would have; the stored jobs
    keep what they were enqueued with. A ``rate_limit=`` change replaces the whole stack of
    rate limits (``rate_limits``) with it, unless that is given too."""
    if "rate_limit" in changes and "rate_limits" not in changes:
        limit = changes["rate_limit"]
        changes["rate_limits"] = () if limit is None else (limit,)
    changed = dataclasses.replace(definition._declared, **changes)
    monkeypatch.setattr(definition, "_declared", changed)


@contextlib.contextmanager
def late_definition(
    directory: pathlib.Path, monkeypatch: t.Any, prefix: str, limit: str
) -> t.Iterator[tuple[types.ModuleType, str]]:
    """A module in ``directory`` (prepended to sys.path) defining ``late``, a job limited by
    ``limits_rate(<limit>)``, imported to enqueue its jobs; a test then forgets it
    (unregisters it, drops it from sys.modules), as in a worker that hasn't imported it yet.
    Yields (module, job name); forgets whatever definition of it is left afterwards."""
    from flask_solidq.definitions import registry

    module_name = f"{prefix}_test_late_{uuid.uuid4().hex}"
    job_name = f"{prefix}_test.late_{uuid.uuid4().hex[:8]}"
    (directory / f"{module_name}.py").write_text(
        textwrap.dedent(
            f"""
            from flask_solidq import limits_rate
            from tests.support import solidq


            @solidq.job(name={job_name!r})
            @limits_rate({limit})
            def late(note=None):
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(directory))
    module = importlib.import_module(module_name)
    try:
        yield module, job_name
    finally:
        registry.unregister(module.late)
        found = registry.find(job_name)
        if found is not None:
            registry.unregister(found)
        sys.modules.pop(module_name, None)


@contextlib.contextmanager
def signals_sent(signal: t.Any) -> t.Iterator[list[tuple[t.Any, dict[str, t.Any]]]]:
    """Collect ``(sender, payload)`` of each ``signal`` sent in the block."""
    sent: list[tuple[t.Any, dict[str, t.Any]]] = []

    def receiver(sender: t.Any, **payload: t.Any) -> None:
        sent.append((sender, payload))

    with signal.connected_to(receiver):
        yield sent
