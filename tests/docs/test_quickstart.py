"""The quickstart as a reader runs it: its sample saved as ``quickstart.py`` and used through
``flask --app quickstart``, each command a process of its own, as in a terminal. Importing the
app (every ``flask`` command does) enqueues nothing; its command and its view enqueue one job
each."""

from __future__ import annotations

import os
import pathlib
import sqlite3
import sys

import pytest

from tests.docs.samples import ROOT
from tests.docs.samples import samples_of
from tests.support import processes

PAGES = ("README.md", "docs/quickstart.md")


def quickstart(page: str) -> str:
    """The page's first Python sample: the quickstart's ``quickstart.py``."""
    return samples_of(ROOT / page)[0].code


def test_the_readme_and_the_quickstart_page_show_the_same_quickstart():
    assert quickstart("README.md") == quickstart("docs/quickstart.md")


@pytest.fixture
def folder(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder holding only ``quickstart.py``, as the README's reader has it."""
    (tmp_path / "quickstart.py").write_text(quickstart("README.md"), "utf-8")
    return tmp_path


def run(folder: pathlib.Path, *args: str) -> str:
    """``python *args`` in ``folder`` (flask-solidq importable from this checkout); its output."""
    environment = {
        **{k: v for k, v in os.environ.items() if k not in ("FLASK_APP", "DATABASE_URL")},
        "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)]),
    }
    result = processes.run(
        [sys.executable, *args],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def flask(folder: pathlib.Path, *args: str) -> str:
    return run(folder, "-m", "flask", "--app", "quickstart", *args)


def stored_jobs(folder: pathlib.Path) -> list[tuple[str, str]]:
    """The queue's jobs in the quickstart's database (Flask-SQLAlchemy puts a relative SQLite
    path in the app's instance folder): each one's name and arguments."""
    with sqlite3.connect(folder / "instance" / "app.db") as connection:
        return connection.execute(
            "SELECT class_name, arguments FROM solidq_jobs ORDER BY id"
        ).fetchall()


def test_importing_the_quickstart_enqueues_nothing_and_its_command_and_view_one_job_each(folder):
    flask(folder, "--help")
    flask(folder, "solidq", "status")
    assert stored_jobs(folder) == []  # the tables exist; no command enqueued anything

    assert flask(folder, "sync-customer", "42") == "stored as job 1\n"
    (job,) = stored_jobs(folder)
    assert job[0] == "sync_customer"
    assert "42" in job[1]

    view = (
        "from quickstart import create_app\n"
        "response = create_app().test_client().post('/customers/7/sync')\n"
        "print(response.status_code, response.get_json())\n"
    )
    assert run(folder, "-c", view) == "202 {'job': 2}\n"
    names = [name for name, _ in stored_jobs(folder)]
    assert names == ["sync_customer", "sync_customer"]
    assert "7" in stored_jobs(folder)[1][1]
