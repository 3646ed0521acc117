"""The example app: migrates with its own history and enqueues from its page."""

from __future__ import annotations

import contextlib
import logging

import flask_migrate
import sqlalchemy as sa

from example_app.app import create_app
from flask_solidq import models


@contextlib.contextmanager
def loggers_kept_enabled():
    """Alembic's env.py runs logging.config.fileConfig, which disables every logger that
    exists; put them back so later tests still see their logs."""
    enabled = [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger) and not logger.disabled
    ]
    try:
        yield
    finally:
        for logger in enabled:
            logger.disabled = False


def test_the_example_app_migrates_and_enqueues_from_its_page(tmp_path):
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/demo.db"})
    with app.app_context(), loggers_kept_enabled():
        flask_migrate.upgrade()
    client = app.test_client()

    response = client.post("/products", data={"name": "Teapot"}, follow_redirects=True)
    assert response.status_code == 200
    assert b"Teapot" in response.data
    client.post("/products/1/reindex", data={"wait": "30"})
    client.post("/contacts/sync", data={"count": "25"})

    with app.app_context():
        engine = app.extensions["solidq"].engine
        with engine.connect() as connection:
            names = connection.scalars(sa.select(models.JobRecord.__table__.c.class_name)).all()
            scheduled = connection.scalar(
                sa.select(sa.func.count()).select_from(models.ScheduledExecution.__table__)
            )
        engine.dispose()
    assert names.count("reindex_product") == 2
    assert names.count("SyncContactJob") == 25
    assert scheduled == 1
    page = client.get("/").get_data(as_text=True)
    assert "<strong>26</strong> ready" in page
    assert "<strong>1</strong> scheduled" in page
