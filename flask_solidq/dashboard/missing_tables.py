"""What the dashboard answers on a database whose flask-solidq tables don't exist yet, or are
of an older schema version (:meth:`~flask_solidq.state.SolidQState.check_tables` raises
:class:`~flask_solidq.PendingMigrations`): 503 with a page naming the commands that fix it,
rather than a bare 500. The check runs again on the next request, so the page goes away once
the tables are migrated, without a restart."""

from __future__ import annotations

import typing as t

from flask import render_template

from flask_solidq.errors import PendingMigrations

if t.TYPE_CHECKING:
    from flask import Blueprint

#: The commands that create or upgrade the tables, in order.
COMMANDS = ("flask solidq install", "flask db upgrade")


def add_handler(blueprint: Blueprint) -> None:
    blueprint.register_error_handler(PendingMigrations, page)


def is_older_schema(error: PendingMigrations) -> bool:
    """Whether the tables exist but lack a later version's columns (``table.column``)."""
    return bool(error.missing_tables) and all("." in name for name in error.missing_tables)


def summary(error: PendingMigrations) -> str:
    """One line saying what is missing and the commands that add it, for a plain-text answer."""
    what = (
        "The flask-solidq tables are of an older schema version"
        if is_older_schema(error)
        else "The flask-solidq tables don't exist in the queue's database yet"
    )
    missing = f" (missing: {', '.join(error.missing_tables)})" if error.missing_tables else ""
    return f"{what}{missing}. Run `{COMMANDS[0]}`, then `{COMMANDS[1]}`."


def page(error: PendingMigrations) -> tuple[str, int]:
    """The page saying what is missing and the commands to run, with status 503."""
    html = render_template(
        "solidq/missing_tables.html",
        older=is_older_schema(error),
        missing=error.missing_tables,
        commands=COMMANDS,
    )
    return html, 503
