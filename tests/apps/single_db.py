"""A one-database app with Flask-Migrate, for the install tests to drive through the `flask` CLI.

Environment: ``SOLIDQ_TEST_DATABASE_URL``, the database; ``SOLIDQ_TEST_WITHOUT_SOLIDQ=1``, the
app as it was before its developers added flask-solidq (to give it a migration history of its
own first).
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from flask import Flask
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq import SolidQ

db = SQLAlchemy()
migrate = Migrate()
solidq = SolidQ()


class Note(db.Model):  # type: ignore[name-defined,misc]
    """The app's own table."""

    __tablename__ = "notes"

    id: Mapped[int] = mapped_column(primary_key=True)
    text: Mapped[str] = mapped_column(sa.String(200))


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = os.environ["SOLIDQ_TEST_DATABASE_URL"]
    db.init_app(app)
    migrate.init_app(app, db)
    if os.environ.get("SOLIDQ_TEST_WITHOUT_SOLIDQ") != "1":
        solidq.init_app(app)
    return app
