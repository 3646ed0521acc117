"""Shared set-up of the benchmarks: which backends to measure, scratch databases, an app."""

from __future__ import annotations

import os
import tempfile
import typing as t

import sqlalchemy as sa
from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from flask_solidq import SolidQ
from flask_solidq import models

DEFAULT_URLS = {
    "postgres": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "mysql": "mysql+pymysql://root@127.0.0.1:3306/test",
}
URL_VARIABLES = {"postgres": "SOLIDQ_TEST_POSTGRES_URL", "mysql": "SOLIDQ_TEST_MYSQL_URL"}

db = SQLAlchemy()
solidq = SolidQ()


@solidq.job(name="bench.noop")
def noop(value: int) -> None:
    """A job that does nothing, to measure the queue itself."""


def backends() -> t.Iterator[tuple[str, str]]:
    """(name, server URL) of every backend that answers; SQLite always."""
    yield "sqlite", ""
    for name, variable in URL_VARIABLES.items():
        url = os.environ.get(variable, DEFAULT_URLS[name])
        try:
            engine = sa.create_engine(url)
            with engine.connect():
                pass
            engine.dispose()
        except Exception as exc:  # noqa: BLE001 - a backend that doesn't answer is left out
            print(f"# {name}: not measured ({exc.__class__.__name__})")
            continue
        yield name, url


def scratch_database(backend: str, server_url: str) -> tuple[str, t.Callable[[], None]]:
    """A fresh database with the flask-solidq tables; returns its URL and a clean-up."""
    if backend == "sqlite":
        directory = tempfile.mkdtemp(prefix="solidq-bench-")
        url = f"sqlite:///{directory}/bench.db"
        drop = lambda: None  # noqa: E731
    else:
        from tests import support

        url = support.create_scratch_database(server_url)
        drop = lambda: support.drop_scratch_database(url)  # noqa: E731
    engine = sa.create_engine(url)
    models.metadata.create_all(engine)
    engine.dispose()
    return url, drop


def create_app(url: str, **config: t.Any) -> Flask:
    """An app with the queue on ``url``."""
    app = Flask("solidq_bench")
    app.config.update(SQLALCHEMY_DATABASE_URI=url, SOLIDQ_DASHBOARD=False, **config)
    db.init_app(app)
    solidq.init_app(app)
    return app


def table(headers: list[str], rows: list[list[t.Any]]) -> str:
    """A plain-text table, right-aligned numbers."""
    cells = [headers] + [
        [f"{cell:,.0f}" if isinstance(cell, float) else str(cell) for cell in row] for row in rows
    ]
    widths = [max(len(row[index]) for row in cells) for index in range(len(headers))]
    lines = [
        "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
