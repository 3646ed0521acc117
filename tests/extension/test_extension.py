"""SolidQ.init_app: the Flask extension contract, configuration, binds."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from flask_solidq import SolidQ
from flask_solidq import models
from tests import support
from tests.jobs import basic as jobs


def make_app(tmp_path, **config) -> Flask:
    app = Flask(__name__)
    app.config.update(SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path}/app.db", **config)
    return app


def test_init_app_registers_state_and_the_cli_group(tmp_path):
    app = make_app(tmp_path)
    SQLAlchemy(app)
    SolidQ(app)

    state = app.extensions["solidq"]
    assert state.settings.adapter == "solidq"
    assert "solidq" in app.cli.commands
    assert app.config["SOLIDQ_SHUTDOWN_TIMEOUT"] == 5
    assert app.config["SOLIDQ_WORKERS"][0]["threads"] == 3


def test_one_extension_serves_many_apps_with_their_own_settings(tmp_path):
    db = SQLAlchemy()
    solidq = SolidQ()
    first = make_app(tmp_path / "a", SOLIDQ_ADAPTER="test")
    second = make_app(tmp_path / "b", SOLIDQ_ADAPTER="inline")
    for app in (first, second):
        db.init_app(app)
        solidq.init_app(app)

    assert first.extensions["solidq"].settings.adapter == "test"
    assert second.extensions["solidq"].settings.adapter == "inline"
    assert not hasattr(solidq, "app")


def test_a_second_registration_is_refused(tmp_path):
    app = make_app(tmp_path)
    SQLAlchemy(app)
    SolidQ(app)
    with pytest.raises(RuntimeError, match="already been registered"):
        SolidQ(app)


def test_an_app_without_flask_sqlalchemy_gets_told_what_to_do(tmp_path):
    with pytest.raises(RuntimeError, match=r"db.init_app\(app\)"):
        SolidQ(make_app(tmp_path))


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("SOLIDQ_ADAPTER", "redis", ValueError),
        ("SOLIDQ_WORKERS", [{"threads": 0}], ValueError),
        ("SOLIDQ_SHUTDOWN_TIMEOUT", "soon", TypeError),
        ("SOLIDQ_PRESERVE_FINISHED_JOBS", "yes", TypeError),
        ("SOLIDQ_BIND", "queue", ValueError),
    ],
)
def test_a_wrong_config_value_fails_init_app_naming_the_key(tmp_path, key, value, error):
    app = make_app(tmp_path, **{key: value})
    SQLAlchemy(app)
    with pytest.raises(error, match=key):
        SolidQ(app)


def test_the_tables_join_the_apps_metadata_for_autogenerate_and_create_all(tmp_path):
    db = SQLAlchemy()
    app = make_app(tmp_path)
    db.init_app(app)
    SolidQ(app)

    assert {table.name for table in models.TABLES} <= set(db.metadata.tables)
    with app.app_context():
        db.create_all()
        names = set(sa.inspect(db.engine).get_table_names())
    assert {table.name for table in models.TABLES} <= names


def test_solidq_bind_puts_every_table_and_every_job_in_that_database(tmp_path):
    db = SQLAlchemy()
    app = make_app(
        tmp_path,
        SQLALCHEMY_BINDS={"queue": f"sqlite:///{tmp_path}/queue.db"},
        SOLIDQ_BIND="queue",
    )
    db.init_app(app)
    SolidQ(app)

    assert "solidq_jobs" in db.metadatas["queue"].tables
    assert "solidq_jobs" not in db.metadatas[None].tables
    with app.app_context():
        db.create_all()
        assert "solidq_jobs" not in sa.inspect(db.engine).get_table_names()
        assert "solidq_jobs" in sa.inspect(db.engines["queue"]).get_table_names()
        assert app.extensions["solidq"].engine.url.database.endswith("queue.db")
        app.extensions["solidq"].engine.dispose()


def test_jobs_are_stored_in_the_bind(tmp_path):
    app = Flask(__name__)
    app.config.update(
        SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path}/app.db",
        SQLALCHEMY_BINDS={"queue": f"sqlite:///{tmp_path}/queue.db"},
        SOLIDQ_BIND="queue",
    )
    support.db.init_app(app)
    support.solidq.init_app(app)
    with app.app_context():
        support.db.create_all(bind_key="queue")
        job = jobs.store_result.perform_later(1)
        queue_engine = support.db.engines["queue"]
        with queue_engine.connect() as connection:
            stored = connection.scalar(sa.select(models.JobRecord.__table__.c.id))
        assert stored == job.provider_job_id
        assert "solidq_jobs" not in sa.inspect(support.db.engines[None]).get_table_names()
        app.extensions["solidq"].engine.dispose()
        for engine in support.db.engines.values():
            engine.dispose()
