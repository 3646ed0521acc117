"""``SolidQ``, the Flask extension object."""

from __future__ import annotations

import contextlib
import typing as t

import sqlalchemy as sa

from flask_solidq import adapters
from flask_solidq import app_transaction
from flask_solidq import cli
from flask_solidq import db
from flask_solidq import models
from flask_solidq.config import load_settings
from flask_solidq.definitions.function_job import make_job
from flask_solidq.definitions.job import Job as _Job
from flask_solidq.operations import queues
from flask_solidq.rate_limiter import RateLimiter
from flask_solidq.state import SolidQState
from flask_solidq.state import get_state

if t.TYPE_CHECKING:
    from flask import Flask
    from flask_sqlalchemy import SQLAlchemy

F = t.TypeVar("F", bound=t.Callable[..., t.Any])


class SolidQ:
    """The flask-solidq extension: a job queue in the app's own database.

    ::

        db = SQLAlchemy()
        solidq = SolidQ()

        def create_app():
            app = Flask(__name__)
            db.init_app(app)
            solidq.init_app(app)
            return app

    One object serves any number of apps; each app's state lives in
    ``app.extensions["solidq"]``. Job definitions are global to the process.
    """

    #: The base class of class-form jobs: ``class SyncJob(solidq.Job): ...``.
    Job = _Job

    def __init__(self, app: Flask | None = None) -> None:
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Set flask-solidq up for ``app``: read and check the ``SOLIDQ_*`` keys, put the
        queue's tables in the app's Flask-SQLAlchemy metadata, add the ``flask solidq``
        commands.

        Call it after ``db.init_app(app)``.

        :raises RuntimeError: the app already has flask-solidq, or has no Flask-SQLAlchemy.
        :raises ValueError, TypeError: a ``SOLIDQ_*`` key holds a value it can't take.
        """
        if "solidq" in app.extensions:
            raise RuntimeError(
                "A 'SolidQ' instance has already been registered on this Flask app."
                " Import and use that instance instead."
            )
        sqlalchemy = app.extensions.get("sqlalchemy")
        if sqlalchemy is None:
            raise RuntimeError(
                "flask-solidq keeps its queue in the app's database through Flask-SQLAlchemy,"
                " and this app has none. Call `db.init_app(app)` before `solidq.init_app(app)`."
            )
        settings = load_settings(app.config)
        binds = app.config.get("SQLALCHEMY_BINDS") or {}
        if settings.bind is not None and settings.bind not in binds:
            raise ValueError(
                f"SOLIDQ_BIND is {settings.bind!r}, but SQLALCHEMY_BINDS has no such bind"
                f" (it has {sorted(binds)}). Add it there, or set SOLIDQ_BIND to None for the"
                " default database."
            )
        _add_tables(sqlalchemy, settings.bind)
        app_transaction.listen()
        app.extensions["solidq"] = SolidQState(app, settings, sqlalchemy)
        app.cli.add_command(cli.solidq_group)

    def job(
        self,
        function: F | None = None,
        *,
        queue: str = "default",
        priority: int = 0,
        name: str | None = None,
    ) -> t.Any:
        """Make a job definition of a function; bare (``@solidq.job``) or with options
        (``@solidq.job(queue="low", priority=5, name="reindex")``).

        The result is a :class:`Job` subclass: calling it calls the function; it has
        ``perform_later``, ``perform_now``, ``set`` and ``new``.

        :raises ValueError: another job already has this name.
        """
        if function is not None:
            return make_job(function, name=name, queue=queue, priority=priority)
        return lambda fn: make_job(fn, name=name, queue=queue, priority=priority)

    @property
    def rate_limiter(self) -> RateLimiter:
        """The budgets of the current app's rate limits: ``is_limited(key)``,
        ``time_until_available(key)``, ``state(key)`` and ``clear_idle_in_batches()``."""
        return RateLimiter()

    def perform_all_later(self, jobs: t.Iterable[_Job]) -> None:
        """Enqueue many jobs at once, with multi-row inserts in one transaction.

        Each job's ``provider_job_id`` and ``successfully_enqueued`` are set. Every argument
        is serialized before anything is written. Database errors propagate unwrapped.
        Requires an application context.
        """
        adapters.enqueue_all(list(jobs))

    def perform_after_commit(self, *jobs: _Job) -> None:
        """Enqueue ``jobs`` right after the app's session commits, and not at all if it rolls
        back; at once when the session has written nothing.

        For a queue on a database of its own (``SOLIDQ_BIND``), where an enqueue can't join
        the app's transaction: the job is then never stored for data that rolled back, but a
        crash between the two commits loses it. Their ``provider_job_id`` is set once they are
        stored. Requires an application context.
        """
        jobs_list = list(jobs)
        state = get_state()
        app_transaction.perform_after_commit(state, lambda: adapters.enqueue_all(jobs_list))

    def pause(self, queue_name: str) -> None:
        """Pause a queue: workers claim nothing from it until :meth:`resume`, while jobs still
        enqueue into it. Pausing a paused queue does nothing.

        Requires an application context.

        :raises flask_solidq.PendingMigrations: the queue's tables don't exist yet.
        """
        state = get_state()
        state.check_tables()
        queues.pause(state.engine, queue_name)

    def resume(self, queue_name: str) -> None:
        """Let workers claim from a paused queue again. Resuming a running queue does
        nothing.

        Requires an application context.

        :raises flask_solidq.PendingMigrations: the queue's tables don't exist yet.
        """
        state = get_state()
        state.check_tables()
        queues.resume(state.engine, queue_name)

    @contextlib.contextmanager
    def transaction(self) -> t.Iterator[sa.Connection]:
        """One transaction on the queue's database that every enqueue inside joins: all of
        them are stored, or (when the block raises) none. Yields the connection.

        Requires an application context.
        """
        with db.transaction(get_state().engine) as connection:
            yield connection


def _add_tables(sqlalchemy: SQLAlchemy, bind: str | None) -> None:
    """Copy the queue's tables into the app's metadata for ``bind``, so that Alembic
    autogenerate knows them (and proposes neither to drop nor to create them) and
    ``db.create_all()`` creates them."""
    target = sqlalchemy.metadatas[bind]
    for table in models.TABLES:
        if table.name not in target.tables:
            table.to_metadata(target)
