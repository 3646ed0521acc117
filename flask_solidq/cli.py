"""``flask solidq ...``: thin click commands over the Python API."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from flask_solidq import install as install_module
from flask_solidq.errors import SolidQError

solidq_group = AppGroup("solidq", help="Run and manage the flask-solidq job queue.")


@solidq_group.command("install")
@click.option("--bind", default=None, help="The SQLALCHEMY_BINDS name the queue lives in.")
@click.option("--directory", default=None, help="The Flask-Migrate directory (default: the app's).")
def install_command(bind: str | None, directory: str | None) -> None:
    """Write the Alembic revision that creates the flask-solidq tables; then run
    `flask db upgrade`."""
    try:
        written = install_module.write_revisions(bind=bind, directory=directory)
    except SolidQError as error:
        raise click.ClickException(str(error)) from error
    if not written:
        click.echo("The flask-solidq tables are already in the migration history.")
        return
    for path in written:
        click.echo(f"Wrote {path}")
    click.echo("Now run `flask db upgrade` to create the tables.")
