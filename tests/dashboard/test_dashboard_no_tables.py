"""The dashboard and ``/metrics`` on a database without the flask-solidq tables, or with the
tables of an older schema version, on every backend: 503 naming the commands that fix it
(``flask solidq install``, then ``flask db upgrade``) instead of a bare 500; and, once the
tables are there, the pages answer without a restart.

Each test has a scratch database of its own whose tables were never created (a temporary file
for SQLite, a ``CREATE DATABASE`` on the server otherwise).
"""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.dashboard import csrf
from tests import support

if t.TYPE_CHECKING:
    import pathlib

    from flask import Flask

COMMANDS = ("flask solidq install", "flask db upgrade")
PAGES = ["/solidq/", "/solidq/jobs?state=failed", "/solidq/queue/mail", "/solidq/processes"]


@pytest.fixture
def empty_url(database_url: str, tmp_path: pathlib.Path) -> t.Iterator[str]:
    """A database on ``database_url``'s backend with no table at all."""
    backend = sa.make_url(database_url).get_backend_name()
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/empty.db"
        return
    server = support.backend_url("postgres" if backend == "postgresql" else "mysql")
    url = support.create_scratch_database(t.cast(str, server))
    try:
        yield url
    finally:
        support.drop_scratch_database(url)


@pytest.fixture
def empty_app(empty_url: str) -> t.Iterator[Flask]:
    app = support.create_app(empty_url, SOLIDQ_DASHBOARD=True)
    yield app
    with app.app_context():
        app.extensions["solidq"].dispose()


def create_tables(app: Flask) -> sa.Engine:
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
    models.metadata.create_all(engine)
    return engine


def says_the_commands(text: str) -> bool:
    first, second = (text.find(command) for command in COMMANDS)
    return 0 <= first < second


@pytest.mark.parametrize("path", PAGES)
def test_a_page_without_the_tables_answers_503_naming_the_commands(empty_app, path):
    response = empty_app.test_client().get(path)
    assert response.status_code == 503
    assert response.mimetype == "text/html"
    text = response.get_data(as_text=True)
    assert "don&#39;t exist yet" in text or "don't exist yet" in text
    assert says_the_commands(text)
    assert "solidq_jobs" in text


def test_metrics_without_the_tables_answers_a_plain_503_naming_the_commands(empty_app):
    pytest.importorskip("prometheus_client")
    response = empty_app.test_client().get("/solidq/metrics")
    assert response.status_code == 503
    assert response.mimetype == "text/plain"
    text = response.get_data(as_text=True)
    assert text.startswith("The flask-solidq tables don't exist in the queue's database yet")
    assert "solidq_jobs" in text
    assert says_the_commands(text)


def test_an_action_without_the_tables_answers_503(empty_app):
    """The 503 page sets the CSRF cookie as any page does; an action with its token passes the
    check and meets the missing tables."""
    client = empty_app.test_client()
    assert client.get("/solidq/").status_code == 503
    cookie = client.get_cookie(csrf.COOKIE, path="/solidq")
    assert cookie is not None
    response = client.post("/solidq/queues/mail/pause", data={csrf.FIELD: cookie.value})
    assert response.status_code == 503
    assert says_the_commands(response.get_data(as_text=True))


def test_the_pages_answer_once_the_tables_are_created_without_a_restart(empty_app):
    client = empty_app.test_client()
    assert client.get("/solidq/").status_code == 503
    create_tables(empty_app)
    assert client.get("/solidq/").status_code == 200
    pytest.importorskip("prometheus_client")
    assert client.get("/solidq/metrics").status_code == 200


def test_tables_of_an_older_schema_version_answer_503_naming_the_missing_columns(empty_app):
    engine = create_tables(empty_app)
    with engine.begin() as connection:
        connection.execute(sa.text("ALTER TABLE solidq_jobs DROP COLUMN started_at"))
    client = empty_app.test_client()
    page = client.get("/solidq/")
    assert page.status_code == 503
    text = page.get_data(as_text=True)
    assert "older schema version" in text
    assert "solidq_jobs.started_at" in text
    assert says_the_commands(text)
    pytest.importorskip("prometheus_client")
    metrics = client.get("/solidq/metrics")
    assert metrics.status_code == 503
    body = metrics.get_data(as_text=True)
    assert body.startswith("The flask-solidq tables are of an older schema version")
    assert "solidq_jobs.started_at" in body
    assert says_the_commands(body)
