"""`flask solidq install` writes the revisions that create exactly the models' tables, and
an app with the tables of an earlier release gets just the revisions it lacks.

Like Flask-Migrate's own tests, these run the real `flask` CLI in subprocesses, in a scratch
folder, against real databases: SQLite always, PostgreSQL and MySQL/MariaDB when
``SOLIDQ_TEST_POSTGRES_URL`` / ``SOLIDQ_TEST_MYSQL_URL`` name a server. Every test gets
databases of its own there (``solidq_install_<random>``), dropped at the end.
"""

from __future__ import annotations

import ast
import datetime as dt
import os
import pathlib
import re
import shutil
import subprocess
import sys
import typing as t
import uuid

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.dialects import mysql

from flask_solidq import models
from flask_solidq.storage.install import schema_versions
from tests.support import processes

ROOT = pathlib.Path(__file__).resolve().parents[2]
APPS = ROOT / "tests" / "apps"
SOLIDQ_TABLES = {table.name for table in models.TABLES}

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param(
        "postgresql",
        id="postgresql",
        marks=pytest.mark.skipif(
            not os.environ.get("SOLIDQ_TEST_POSTGRES_URL"),
            reason="SOLIDQ_TEST_POSTGRES_URL is not set",
        ),
    ),
    pytest.param(
        "mysql",
        id="mysql",
        marks=pytest.mark.skipif(
            not os.environ.get("SOLIDQ_TEST_MYSQL_URL"), reason="SOLIDQ_TEST_MYSQL_URL is not set"
        ),
    ),
]


class Databases:
    """Makes scratch databases on one backend and drops them all at the end."""

    def __init__(self, backend: str, tmp_path: pathlib.Path) -> None:
        self.backend = backend
        self.tmp_path = tmp_path
        self.server_url = {
            "postgresql": os.environ.get("SOLIDQ_TEST_POSTGRES_URL", ""),
            "mysql": os.environ.get("SOLIDQ_TEST_MYSQL_URL", ""),
        }.get(backend)
        self.created: list[str] = []
        self.engines: list[sa.Engine] = []

    def new(self) -> str:
        """The URL of a new, empty database."""
        name = f"solidq_install_{uuid.uuid4().hex[:12]}"
        if self.backend == "sqlite":
            return f"sqlite:///{self.tmp_path / name}.db"
        assert self.server_url
        charset = " CHARACTER SET utf8mb4" if self.backend == "mysql" else ""
        with self._server().connect() as connection:
            connection.execute(sa.text(f"CREATE DATABASE {name}{charset}"))
        self.created.append(name)
        return sa.make_url(self.server_url).set(database=name).render_as_string(False)

    def engine(self, url: str) -> sa.Engine:
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        self.engines.append(engine)
        return engine

    def drop_all(self) -> None:
        for engine in self.engines:
            engine.dispose()
        if not self.created:
            return
        force = " WITH (FORCE)" if self.backend == "postgresql" else ""
        with self._server().connect() as connection:
            for name in self.created:
                connection.execute(sa.text(f"DROP DATABASE IF EXISTS {name}{force}"))

    def _server(self) -> sa.Engine:
        assert self.server_url
        return self.engine(self.server_url).execution_options(isolation_level="AUTOCOMMIT")


@pytest.fixture(params=BACKENDS)
def databases(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> t.Iterator[Databases]:
    databases = Databases(request.param, tmp_path)
    try:
        yield databases
    finally:
        databases.drop_all()


class FlaskCLI:
    """Runs `flask --app <app> ...` in a scratch folder, as a developer would."""

    def __init__(self, folder: pathlib.Path, app: str, **environ: str) -> None:
        self.folder = folder
        self.app = app
        self.environ = {
            **{k: v for k, v in os.environ.items() if not k.startswith("FLASK_")},
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(APPS)]),
            **environ,
        }

    def __call__(
        self, *args: str, check: bool = True, **environ: str
    ) -> subprocess.CompletedProcess[str]:
        result = processes.run(
            [sys.executable, "-m", "flask", "--app", self.app, *args],
            cwd=self.folder,
            env={**self.environ, **environ},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check:
            assert result.returncode == 0, (
                f"flask {' '.join(args)} exited {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        return result

    @property
    def versions(self) -> pathlib.Path:
        return self.folder / "migrations" / "versions"

    def revisions(self) -> dict[str, pathlib.Path]:
        """The revision files of the history, by file name."""
        return {path.name: path for path in self.versions.glob("*.py")}


@pytest.fixture(scope="session")
def initialized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    """What `flask db init` and `flask db init --multidb` make, made once (the folders hold no
    path and no database state, so every test starts from a copy)."""
    folders = {}
    for kind, args in {"single": ("db", "init"), "multi": ("db", "init", "--multidb")}.items():
        folder = tmp_path_factory.mktemp(f"db-init-{kind}")
        flask = FlaskCLI(folder, "multi_db", SOLIDQ_TEST_DATABASE_URL="sqlite://")
        flask(*args, SOLIDQ_TEST_QUEUE_DATABASE_URL="sqlite://")
        folders[kind] = folder / "migrations"
    return folders


def copy_migrations(initialized: pathlib.Path, folder: pathlib.Path) -> None:
    shutil.copytree(initialized, folder / "migrations")


def module_variable(path: pathlib.Path, name: str) -> t.Any:
    """The literal a revision file assigns to a module-level variable."""
    match = re.search(rf"^{name} = (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
    assert match, f"{path.name} has no {name}"
    return ast.literal_eval(match[1])


def chain_after(flask: FlaskCLI, head: str | None) -> list[pathlib.Path]:
    """The revision files that follow ``head`` in the history, oldest first."""
    paths = flask.revisions().values()
    following = {module_variable(path, "down_revision"): path for path in paths}
    chain = []
    while head in following:
        chain.append(following[head])
        head = module_variable(chain[-1], "revision")
    return chain


def table_names(engine: sa.Engine) -> set[str]:
    with engine.connect() as connection:
        return set(sa.inspect(connection).get_table_names())


def schema_differences(engine: sa.Engine) -> list[t.Any]:
    """What Alembic autogenerate finds between the database's solidq_ tables and the models
    (columns, types, nullability, server defaults, keys, constraints, indexes and their names),
    plus the MySQL/MariaDB datetime columns that would drop microseconds (autogenerate
    doesn't compare fractional-second precision)."""

    def only_solidq(name: str | None, type_: str, parent_names: t.Any) -> bool:
        return type_ != "table" or bool(name and name.startswith("solidq_"))

    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "compare_server_default": True,
                "include_name": only_solidq,
            },
        )
        differences = list(compare_metadata(context, models.metadata))
        if engine.dialect.name in ("mysql", "mariadb"):
            inspector = sa.inspect(connection)
            existing = set(inspector.get_table_names())
            for table in models.TABLES:
                if table.name not in existing:
                    continue  # a missing table is one of the differences already
                for column in inspector.get_columns(table.name):
                    if isinstance(column["type"], mysql.DATETIME) and column["type"].fsp != 6:
                        differences.append(("datetime without microseconds", table.name, column))
    return differences


def test_every_template_records_its_schema_version_and_imports_nothing_from_flask_solidq() -> None:
    versions = schema_versions()
    assert [version.number for version in versions] == list(range(1, len(versions) + 1))
    for version in versions:
        text = version.render(
            revision="abc",
            down_revision=None,
            target="queue",
            create_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
        )
        assert "$" not in text
        assert not re.search(r"^\s*(from|import) flask_solidq", text, re.MULTILINE)
        namespace: dict[str, t.Any] = {}
        exec(compile(text, version.name, "exec"), namespace)
        assert namespace["solidq_schema_version"] == version.number
        assert namespace["solidq_template"] == version.name
        assert namespace["solidq_target"] == "queue"
        assert (namespace["revision"], namespace["down_revision"]) == ("abc", None)


@pytest.mark.processes
def test_install_chains_every_schema_version_after_the_apps_head_creating_exactly_the_models(
    databases: Databases, initialized: dict[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    url = databases.new()
    engine = databases.engine(url)
    flask = FlaskCLI(tmp_path, "single_db", SOLIDQ_TEST_DATABASE_URL=url)
    copy_migrations(initialized["single"], tmp_path)  # `flask db init`

    # The app's migration history of its own, from before it took flask-solidq in.
    flask("db", "migrate", "-m", "notes", SOLIDQ_TEST_WITHOUT_SOLIDQ="1")
    (app_head,) = [module_variable(path, "revision") for path in flask.revisions().values()]
    before = set(flask.revisions())

    result = flask("solidq", "install")

    # Every schema version, oldest first, chained after the app's head.
    added = chain_after(flask, app_head)
    assert {path.name for path in added} == set(flask.revisions()) - before
    versions = schema_versions()
    assert [module_variable(path, "solidq_schema_version") for path in added] == [
        version.number for version in versions
    ]
    for path, version in zip(added, versions, strict=True):
        assert path.name == f"{module_variable(path, 'revision')}_{version.slug}.py"
        assert path.name in result.stdout
    assert "flask db upgrade" in result.stdout
    assert added[0].name.endswith("_create_flask_solidq_tables.py")

    flask("db", "upgrade")
    assert table_names(engine) == SOLIDQ_TABLES | {"notes", "alembic_version"}
    assert schema_differences(engine) == []

    # Again: the history has them already.
    result = flask("solidq", "install")
    assert f"(schema version {versions[-1].number}) are already" in result.stdout
    assert set(flask.revisions()) == before | {path.name for path in added}

    # Autogenerate takes the tables for the app's own: nothing to drop, nothing to create.
    flask("db", "migrate", "-m", "nothing")
    for name, path in flask.revisions().items():
        if name not in before | {path.name for path in added}:
            assert "solidq_" not in path.read_text(encoding="utf-8")
            path.unlink()

    flask("db", "downgrade", app_head)
    assert table_names(engine) == {"notes", "alembic_version"}


#: What the process commands' version adds to solidq_processes (tests/storage/
#: test_install_process_commands.py).
PROCESS_COMMANDS = [("add_column", "solidq_processes.command")]

#: What version 7 adds to version 3's solidq_batches: a batch's parent.
BATCH_PARENTS = [
    ("add_column", "solidq_batches.parent_id"),
    ("add_index", "ix_solidq_batches_parent_id"),
]

#: What version 8 adds: the job statistics.
JOB_STATS = [("add_table", "solidq_job_stats")]

#: What the models have that schema version 3's tables don't, as Alembic names it: version
#: 4's attempt history and start times, version 5's budgets' admissions, version 6's charges
#: and back-offs, version 7's batch parents, version 8's job statistics, and the process
#: commands.
LATER_THAN_VERSION_3 = [
    *BATCH_PARENTS,
    *JOB_STATS,
    *PROCESS_COMMANDS,
    ("add_table", "solidq_job_failures"),
    ("add_index", "ix_solidq_job_failures_job_id_id"),
    ("add_column", "solidq_jobs.started_at"),
    ("add_column", "solidq_rate_limits.admissions"),
    ("add_column", "solidq_jobs.rate_limit_charges"),
    ("add_column", "solidq_rate_limits.backed_off_until"),
]

#: What the models have that schema version 1's tables don't, as Alembic names it: version 2's
#: index, version 3's batches (with version 7's parent, in the table it creates), and what
#: versions 4 to 7 add.
LATER_THAN_VERSION_1 = sorted(
    [
        ("add_index", "ix_solidq_coalesced_calls_for_monitoring"),
        ("add_table", "solidq_batches"),
        ("add_index", "ix_solidq_batches_finished_at"),
        ("add_index", "ix_solidq_batches_parent_id"),
        ("add_column", "solidq_jobs.batch_id"),
        ("add_index", "ix_solidq_jobs_batch_id"),
        *(change for change in LATER_THAN_VERSION_3 if change not in BATCH_PARENTS),
    ]
)


def named(differences: list[t.Any]) -> list[tuple[str, str]]:
    """Alembic's differences as (kind, name) pairs, sorted: a column as table.column."""
    pairs = []
    for difference in differences:
        if difference[0] == "add_column":
            _kind, _schema, table, column = difference
            pairs.append(("add_column", f"{table}.{column.name}"))
        else:
            kind, item = difference
            pairs.append((kind, item.name))
    return sorted(pairs)


@pytest.mark.processes
def test_an_app_on_schema_version_1_gets_only_the_later_revisions_and_keeps_its_rows(
    databases: Databases, initialized: dict[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    url = databases.new()
    engine = databases.engine(url)
    flask = FlaskCLI(tmp_path, "single_db", SOLIDQ_TEST_DATABASE_URL=url)
    copy_migrations(initialized["single"], tmp_path)  # `flask db init`

    # What a release with schema version 1 alone wrote and ran (a template is never edited
    # once published, so version 1's revision is the same text it wrote then).
    flask("solidq", "install")
    for path in flask.revisions().values():
        if module_variable(path, "solidq_schema_version") > 1:
            path.unlink()
    (first,) = flask.revisions().values()
    flask("db", "upgrade")
    assert named(schema_differences(engine)) == LATER_THAN_VERSION_1
    now = dt.datetime(2026, 1, 1)
    with engine.begin() as connection:
        job_id = connection.execute(
            models.JobRecord.__table__.insert().values(
                queue_name="default", class_name="c", priority=0, created_at=now, updated_at=now
            )
        ).inserted_primary_key[0]
        connection.execute(
            models.CoalescedCall.__table__.insert().values(job_id=job_id, created_at=now)
        )

    result = flask("solidq", "install")

    (second, *later) = chain_after(flask, module_variable(first, "revision"))
    assert len(flask.revisions()) == 2 + len(later)
    assert module_variable(second, "solidq_schema_version") == 2
    assert second.name in result.stdout
    latest = schema_versions()[-1].number
    assert f"brings the ones you have to schema version {latest}" in result.stdout
    flask("db", "upgrade")
    assert schema_differences(engine) == []

    flask("db", "downgrade", module_variable(first, "revision"))
    assert named(schema_differences(engine)) == LATER_THAN_VERSION_1
    with engine.connect() as connection:
        calls = models.CoalescedCall.__table__
        assert connection.execute(sa.select(calls.c.job_id)).scalars().all() == [job_id]


@pytest.mark.processes
def test_install_with_a_bind_creates_the_tables_in_that_database_only(
    databases: Databases, initialized: dict[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    default_url, queue_url = databases.new(), databases.new()
    default, queue = databases.engine(default_url), databases.engine(queue_url)
    flask = FlaskCLI(
        tmp_path,
        "multi_db",
        SOLIDQ_TEST_DATABASE_URL=default_url,
        SOLIDQ_TEST_QUEUE_DATABASE_URL=queue_url,
    )
    copy_migrations(initialized["multi"], tmp_path)  # `flask db init --multidb`

    flask("solidq", "install")
    revisions = chain_after(flask, None)
    assert len(revisions) == len(schema_versions()) == len(flask.revisions())
    assert {module_variable(path, "solidq_target") for path in revisions} == {"queue"}

    flask("db", "upgrade")
    assert table_names(queue) == SOLIDQ_TABLES | {"alembic_version"}
    assert not {name for name in table_names(default) if name.startswith("solidq_")}
    assert schema_differences(queue) == []

    # Autogenerate, for the queue's database too: nothing to drop, nothing to create.
    flask("db", "migrate", "-m", "nothing")
    for path in flask.revisions().values():
        if path not in revisions:
            assert "solidq_" not in path.read_text(encoding="utf-8")
            path.unlink()

    flask("db", "downgrade", "base")
    assert table_names(queue) == {"alembic_version"}


@pytest.mark.processes
def test_install_says_what_to_run_first_when_it_cannot_write_a_revision_that_would_run(
    initialized: dict[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    (tmp_path / "multi").mkdir()
    flask = FlaskCLI(
        tmp_path / "multi",
        "multi_db",
        SOLIDQ_TEST_DATABASE_URL=f"sqlite:///{tmp_path / 'app.db'}",
        SOLIDQ_TEST_QUEUE_DATABASE_URL=f"sqlite:///{tmp_path / 'queue.db'}",
    )

    # No migrations folder yet.
    result = flask("solidq", "install", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "Run `flask db init --multidb` first" in result.stderr

    # A single-database env.py never runs a revision for the "queue" bind.
    copy_migrations(initialized["single"], tmp_path / "multi")  # `flask db init`
    result = flask("solidq", "install", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "'queue'" in result.stderr and "`flask db init --multidb`" in result.stderr
    assert flask.revisions() == {}

    # Nor can it go into a bind the app doesn't have.
    result = flask("solidq", "install", "--bind", "nosuch", check=False)
    assert result.returncode == 1 and "no bind 'nosuch' in SQLALCHEMY_BINDS" in result.stderr

    # Two heads: which one would the tables follow?
    (tmp_path / "single").mkdir()
    shutil.copytree(initialized["single"], tmp_path / "single" / "history")
    for name in ("one", "two"):
        (tmp_path / "single" / "history" / "versions" / f"{name}.py").write_text(
            f"revision = {name!r}\ndown_revision = None\n"
            "def upgrade():\n    pass\n"
            "def downgrade():\n    pass\n"
        )
    flask = FlaskCLI(tmp_path / "single", "single_db", SOLIDQ_TEST_DATABASE_URL="sqlite://")
    result = flask("solidq", "install", "--directory", "history", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "several heads (one, two)" in result.stderr
    assert "`flask db merge heads`" in result.stderr
    assert len(list((tmp_path / "single" / "history" / "versions").glob("*.py"))) == 2
