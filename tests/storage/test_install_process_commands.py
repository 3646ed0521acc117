"""The process commands' schema version (solidq_processes.command) on an app that has the
version before it: `flask solidq install` writes that revision, `flask db upgrade` adds the
column keeping the registered processes (with no command), and `flask db downgrade` takes it
off again, keeping them.

On SQLite always, PostgreSQL and MySQL/MariaDB when their URLs are set (as test_install.py).
The version's number is looked up by its template's name, never written here: it may change
when another version is released before it.
"""

from __future__ import annotations

import datetime as dt
import pathlib

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.storage.install import schema_versions
from tests.storage.test_install import PROCESS_COMMANDS
from tests.storage.test_install import Databases
from tests.storage.test_install import FlaskCLI
from tests.storage.test_install import chain_after
from tests.storage.test_install import copy_migrations
from tests.storage.test_install import databases  # noqa: F401 - a fixture
from tests.storage.test_install import initialized  # noqa: F401 - a fixture
from tests.storage.test_install import module_variable
from tests.storage.test_install import named
from tests.storage.test_install import schema_differences

PROCESSES = models.ProcessRecord.__table__
SLUG = "add_solidq_process_commands"


@pytest.mark.processes
def test_an_app_on_the_version_before_gets_the_process_commands_and_keeps_its_processes(
    databases: Databases,  # noqa: F811
    initialized: dict[str, pathlib.Path],  # noqa: F811
    tmp_path: pathlib.Path,
) -> None:
    (number,) = [version.number for version in schema_versions() if version.slug == SLUG]
    url = databases.new()
    engine = databases.engine(url)
    flask = FlaskCLI(tmp_path, "single_db", SOLIDQ_TEST_DATABASE_URL=url)
    copy_migrations(initialized["single"], tmp_path)

    # What the release before wrote and ran.
    flask("solidq", "install")
    for path in flask.revisions().values():
        if module_variable(path, "solidq_schema_version") >= number:
            path.unlink()
    flask("db", "upgrade")
    assert set(PROCESS_COMMANDS) <= set(named(schema_differences(engine)))
    (previous,) = [
        path
        for path in flask.revisions().values()
        if module_variable(path, "solidq_schema_version") == number - 1
    ]
    moment = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    with engine.begin() as connection:
        connection.execute(
            PROCESSES.insert().values(
                kind="Worker", name="worker-1", pid=1, last_heartbeat_at=moment, created_at=moment
            )
        )

    result = flask("solidq", "install")

    (commands, *_later) = chain_after(flask, module_variable(previous, "revision"))
    assert module_variable(commands, "solidq_schema_version") == number
    assert commands.name.endswith(f"_{SLUG}.py")
    assert commands.name in result.stdout
    flask("db", "upgrade")
    assert schema_differences(engine) == []
    with engine.begin() as connection:
        assert connection.execute(sa.select(PROCESSES.c.name, PROCESSES.c.command)).all() == [
            ("worker-1", None)
        ]
        connection.execute(PROCESSES.update().values(command="stop"))

    flask("db", "downgrade", module_variable(previous, "revision"))
    assert set(PROCESS_COMMANDS) <= set(named(schema_differences(engine)))
    with engine.connect() as connection:
        columns = {column["name"] for column in sa.inspect(connection).get_columns(PROCESSES.name)}
        assert "command" not in columns
        names = connection.execute(sa.select(PROCESSES.c.name)).scalars().all()
        assert names == ["worker-1"]
