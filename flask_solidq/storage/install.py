"""``flask solidq install``: write the Alembic revisions that create the queue's tables.

The queue's tables belong to the app's own migration history (API.md section 7), so they are
created, upgraded and rolled back with ``flask db upgrade`` / ``downgrade`` like the app's own
tables, in the same order on every machine. Install writes them into that history from the
templates in flask-solidq's ``migrations/`` folder rather than autogenerating them: a template
is a frozen, reviewed snapshot of one schema version that imports nothing from flask_solidq, so
a revision keeps meaning what it meant when it was written, whatever flask-solidq version is
installed when it runs. The tests keep the templates and the models equal.

Templates are numbered schema versions (``0001_create_flask_solidq_tables.py.tmpl``, later
``0002_...``). Each written revision records its version and target database in module-level
``solidq_*`` variables; install reads them back from the history and writes only the versions
that come after the newest one already there, chained after the current head. Running it twice
writes nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import pathlib
import re
import string
import typing as t

from alembic.config import Config
from alembic.script import Script
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from alembic.util import rev_id
from flask import current_app

from flask_solidq.errors import SolidQError
from flask_solidq.storage.resources import resource_dir

#: ``NNNN_<slug>.py.tmpl``: schema version NNNN, written as ``<revision>_<slug>.py``.
TEMPLATE_NAME = re.compile(r"^(?P<number>\d{4})_(?P<slug>[a-z0-9_]+)\.py\.tmpl$")


class InstallError(SolidQError):
    """`flask solidq install` can't write the revisions; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class SchemaVersion:
    """One template of ``migrations/``: a schema version of the flask-solidq tables."""

    number: int
    slug: str
    path: pathlib.Path

    @property
    def name(self) -> str:
        """The template's name without ``.py.tmpl``, as its revisions record it."""
        return f"{self.number:04d}_{self.slug}"

    def render(
        self, *, revision: str, down_revision: str | None, target: str, create_date: dt.datetime
    ) -> str:
        """The revision file's text: the template with its placeholders filled in
        (migrations/README lists them)."""
        template = string.Template(self.path.read_text(encoding="utf-8"))
        return template.substitute(
            revision=revision,
            revises=down_revision or "",
            create_date=create_date.isoformat(sep=" ", timespec="seconds"),
            database=f"the bind {target!r}" if target else "the default database",
            revision_literal=_literal(revision),
            down_revision_literal=_literal(down_revision),
            target_literal=_literal(target),
        )


def schema_versions() -> list[SchemaVersion]:
    """Every schema version flask-solidq ships, oldest first.

    :raises RuntimeError: the numbers don't run 1, 2, 3, ... (a broken release).
    """
    versions = []
    for path in resource_dir("migrations").iterdir():
        match = TEMPLATE_NAME.match(path.name)
        if match:
            versions.append(SchemaVersion(int(match["number"]), match["slug"], path))
    versions.sort(key=lambda version: version.number)
    numbers = [version.number for version in versions]
    if numbers != list(range(1, len(numbers) + 1)):
        raise RuntimeError(
            f"flask-solidq's migration templates are numbered {numbers}, not 1, 2, 3, ..."
            " Reinstall flask-solidq."
        )
    return versions


def write_revisions(*, bind: str | None = None, directory: str | None = None) -> list[pathlib.Path]:
    """Write the revisions the app's migration history lacks for the queue's tables into its
    versions folder, chained after the current head; return their paths (empty when the
    history already has them all). Requires an application context.

    :param bind: the ``SQLALCHEMY_BINDS`` name the tables go in; default ``SOLIDQ_BIND``.
    :param directory: the Flask-Migrate folder, relative to the working directory like
        Flask-Migrate's; default the app's ``Migrate(directory=...)``, else ``migrations``.
    :raises InstallError: no Flask-Migrate folder; a bind that isn't in ``SQLALCHEMY_BINDS``
        or that a single-database ``env.py`` can't migrate; a history with several heads.
    """
    if bind is None:
        bind = _configured_bind()
    _check_bind(bind)
    target = bind or ""
    folder = pathlib.Path(directory or _default_directory())
    _check_folder(folder, bind)

    try:
        script = ScriptDirectory.from_config(_alembic_config(folder))
        revisions = list(script.walk_revisions())
        versions_folder = pathlib.Path(script.versions)
    except CommandError as error:
        raise InstallError(f"Alembic can't read the migrations in {folder}: {error}") from error

    installed = _installed_versions(revisions, target)
    pending = [version for version in schema_versions() if version.number > installed]
    if not pending:
        return []

    heads = script.get_heads()
    if len(heads) > 1:
        raise InstallError(
            f"The migration history in {folder} has several heads ({', '.join(sorted(heads))})."
            " Merge them first with `flask db merge heads`, then run `flask solidq install`"
            " again."
        )
    down_revision = heads[0] if heads else None
    taken = {revision.revision for revision in revisions}
    written = []
    for version in pending:
        revision = _new_revision_id(taken)
        text = version.render(
            revision=revision,
            down_revision=down_revision,
            target=target,
            create_date=dt.datetime.now(dt.timezone.utc),
        )
        path = versions_folder / f"{revision}_{version.slug}.py"
        compile(text, str(path), "exec")  # a broken template fails here, not in `db upgrade`
        with path.open("x", encoding="utf-8") as file:
            file.write(text)
        written.append(path)
        taken.add(revision)
        down_revision = revision
    return written


def _configured_bind() -> str | None:
    state = current_app.extensions.get("solidq")
    if state is None:
        return None
    bind: str | None = state.settings.bind
    return bind


def _check_bind(bind: str | None) -> None:
    if bind is None:
        return
    binds = current_app.config.get("SQLALCHEMY_BINDS") or {}
    if bind not in binds:
        raise InstallError(
            f"There is no bind {bind!r} in SQLALCHEMY_BINDS (it has {sorted(binds)})."
            " Name one of those, or leave out --bind and SOLIDQ_BIND for the default database."
        )


def _default_directory() -> str:
    migrate = current_app.extensions.get("migrate")
    return str(getattr(migrate, "directory", None) or "migrations")


def _check_folder(folder: pathlib.Path, bind: str | None) -> None:
    """Refuse a folder that isn't a Flask-Migrate folder, or whose ``env.py`` would never run
    a revision for ``bind``."""
    init = "flask db init --multidb" if bind else "flask db init"
    if not (folder / "env.py").is_file() or not (folder / "versions").is_dir():
        raise InstallError(
            f"There is no Flask-Migrate migrations folder at {folder} (with an env.py and a"
            f" versions folder). Run `{init}` first, or point --directory at yours."
        )
    if bind and not _is_multidb(folder / "env.py"):
        raise InstallError(
            f"The queue's tables go in the bind {bind!r}, but {folder / 'env.py'} is"
            " Flask-Migrate's single-database env.py, which migrates only the default database,"
            " so a revision for that bind would never run. Set the migrations up for several"
            " databases with `flask db init --multidb`, or install into the default database"
            " (no --bind, SOLIDQ_BIND = None)."
        )


def _is_multidb(env_py: pathlib.Path) -> bool:
    """Whether ``env.py`` is Flask-Migrate's multi-database one, which hands every revision's
    ``upgrade(engine_name)`` the name of each database in turn; the single-database one never
    mentions an engine name."""
    return "engine_name" in env_py.read_text(encoding="utf-8")


def _alembic_config(folder: pathlib.Path) -> Config:
    """The Alembic config ``flask db`` uses for ``folder``, so any configure callbacks of the
    app (version locations and the like) apply here too."""
    migrate = current_app.extensions.get("migrate")
    if migrate is not None and hasattr(migrate, "migrate"):
        config: Config = migrate.migrate.get_config(str(folder))
        return config
    config = Config(str(folder / "alembic.ini"))
    config.set_main_option("script_location", str(folder))
    return config


def _installed_versions(revisions: t.Iterable[Script], target: str) -> int:
    """The newest schema version the history already has for ``target`` (0 for none), read
    from the ``solidq_*`` variables of its revisions.

    A revision that `flask db migrate` autogenerated with ``solidq_jobs`` in it (the app ran
    it after ``solidq.init_app`` and before installing) created the same tables from the same
    models, so it counts as schema version 1.
    """
    newest = 0
    for revision in revisions:
        module = revision.module
        number = getattr(module, "solidq_schema_version", None)
        if isinstance(number, int) and getattr(module, "solidq_target", "") == target:
            newest = max(newest, number)
        elif number is None and _creates_jobs_table(revision.path):
            newest = max(newest, 1)
    return newest


def _creates_jobs_table(path: str) -> bool:
    text = pathlib.Path(path).read_text(encoding="utf-8")
    return re.search(r"create_table\(\s*['\"]solidq_jobs['\"]", text) is not None


def _literal(value: str | None) -> str:
    """``value`` as a Python literal in the double quotes the rest of a template uses (a JSON
    string is a valid Python string literal)."""
    return "None" if value is None else json.dumps(value)


def _new_revision_id(taken: set[str]) -> str:
    revision = rev_id()
    while revision in taken:
        revision = rev_id()
    return revision
