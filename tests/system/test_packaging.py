"""The wheel ships what an installed flask-solidq needs besides its code (the migration
templates, the dashboard's templates and static files), and `flask solidq install` works from
an installed wheel, far from the source tree."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sqlite3
import sys
import textwrap
import zipfile

import pytest

from flask_solidq import models
from tests.support import processes

ROOT = pathlib.Path(__file__).resolve().parents[2]

APP = """
from flask import Flask
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy

from flask_solidq import SolidQ

db = SQLAlchemy()
migrate = Migrate()
solidq = SolidQ()


def create_app():
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = "sqlite:///app.db"
    db.init_app(app)
    migrate.init_app(app, db)
    solidq.init_app(app)
    return app
"""


def run(*args: str | pathlib.Path, cwd: pathlib.Path) -> str:
    environ = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "FLASK_APP")
    }
    result = processes.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, args))} exited {result.returncode}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result.stdout


@pytest.mark.slow
@pytest.mark.processes
def test_the_wheel_ships_its_data_folders_and_installs_the_tables_from_a_fresh_venv(
    tmp_path: pathlib.Path,
) -> None:
    dist = tmp_path / "dist"
    # Without isolation when hatchling is at hand: no second download of the build backend.
    isolation = ["--no-isolation"] if importlib.util.find_spec("hatchling") else []
    run(sys.executable, "-m", "build", "--wheel", *isolation, "--outdir", dist, ROOT, cwd=ROOT)
    (wheel,) = dist.glob("flask_solidq-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "flask_solidq/migrations/0001_create_flask_solidq_tables.py.tmpl" in names
    assert "flask_solidq/migrations/README" in names
    for folder in ("templates", "static"):
        assert any(name.startswith(f"flask_solidq/{folder}/") for name in names), folder

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path)

    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text(textwrap.dedent(APP))
    location = run(
        python,
        "-c",
        "from flask_solidq.storage.resources import resource_dir;"
        " print(resource_dir('migrations'))",
        cwd=project,
    )
    assert pathlib.Path(location.strip()).is_relative_to(venv)

    flask = [python, "-m", "flask", "--app", "app"]
    run(*flask, "db", "init", cwd=project)
    assert "create_flask_solidq_tables.py" in run(*flask, "solidq", "install", cwd=project)
    run(*flask, "db", "upgrade", cwd=project)

    # Flask-SQLAlchemy puts a relative SQLite path in the app's instance folder.
    with sqlite3.connect(project / "instance" / "app.db") as connection:
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        tables = {row[0] for row in connection.execute(query)}
    assert tables == {table.name for table in models.TABLES} | {"alembic_version"}
