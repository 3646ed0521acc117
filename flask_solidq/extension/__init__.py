"""``SolidQ``, the Flask extension object: setting an app up, the job decorator, enqueueing,
queues and batches. Acting on stored jobs is :mod:`.job_actions`'s part of it; the dashboard
check and lifecycle hooks it registers, :mod:`.registrations`'."""

from __future__ import annotations

import contextlib
import typing as t

import sqlalchemy as sa

from flask_solidq import cli
from flask_solidq import current
from flask_solidq import dashboard
from flask_solidq import models
from flask_solidq import tracing
from flask_solidq.batches import Callback
from flask_solidq.config import DEFAULTS
from flask_solidq.config import keys as config_keys
from flask_solidq.config import load_settings
from flask_solidq.controls.rate_limit.limiter import RateLimiter
from flask_solidq.current import OpenBatch
from flask_solidq.definitions.calls import Call
from flask_solidq.definitions.function_job import FunctionJob
from flask_solidq.definitions.function_job import JobDecorator
from flask_solidq.definitions.job import Job as _Job
from flask_solidq.definitions.step_options import Default
from flask_solidq.extension import adapters
from flask_solidq.extension import batching
from flask_solidq.extension.job_actions import JobActions
from flask_solidq.extension.registrations import Registrations
from flask_solidq.lifecycle import LifecycleHooks
from flask_solidq.operations import queues
from flask_solidq.state import SolidQState
from flask_solidq.state import get_state
from flask_solidq.storage import app_transaction
from flask_solidq.storage import db

if t.TYPE_CHECKING:
    from flask import Flask
    from flask_sqlalchemy import SQLAlchemy

P = t.ParamSpec("P")
R = t.TypeVar("R")


class SolidQ(JobActions, Registrations):
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

    #: The base class of class-form jobs: ``class SyncJob(solidq.Job): ...``, the same class as
    #: ``flask_solidq.Job``. Type checkers want that spelling: mypy resolves a base class by
    #: name before it knows any variable's type, so it can't take ``solidq.Job`` (an attribute
    #: of an instance) as a base.
    Job = _Job

    def __init__(self, app: Flask | None = None) -> None:
        # The lifecycle hooks, shared by every app this object serves (see
        # on_process_start); each app's state refers to them.
        self._lifecycle_hooks = LifecycleHooks()
        self._dashboard_rules: list[t.Callable[[], bool]] = []
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
        config_keys.warn_misspelled(app.config, {*DEFAULTS, *dashboard.SETTINGS})
        binds = app.config.get("SQLALCHEMY_BINDS") or {}
        if settings.bind is not None and settings.bind not in binds:
            raise ValueError(
                f"SOLIDQ_BIND is {settings.bind!r}, but SQLALCHEMY_BINDS has no such bind"
                f" (it has {sorted(binds)}). Add it there, or set SOLIDQ_BIND to None for the"
                " default database."
            )
        _add_tables(sqlalchemy, settings.bind)
        app_transaction.listen()
        tracing.install()
        app.extensions["solidq"] = SolidQState(
            app,
            settings,
            sqlalchemy,
            self._lifecycle_hooks,
            self._dashboard_rules,
        )
        app.cli.add_command(cli.solidq_group)
        if settings.dashboard:
            dashboard.register(app, settings.dashboard_url_prefix)

    @t.overload
    def job(self, function: t.Callable[[list[Call]], R]) -> type[FunctionJob[..., R]]: ...
    @t.overload
    def job(self, function: t.Callable[P, R]) -> type[FunctionJob[P, R]]: ...
    @t.overload
    def job(
        self,
        *,
        queue: str = "default",
        priority: int = 0,
        name: str | None = None,
        max_resumptions: int | None | Default = Default.CONFIG,
        resume_errors: tuple[type[Exception], ...] = (),
    ) -> JobDecorator: ...
    def job(
        self,
        # Any: the implementation of the overloads above, which type each case.
        function: t.Callable[..., t.Any] | None = None,
        *,
        queue: str = "default",
        priority: int = 0,
        name: str | None = None,
        max_resumptions: int | None | Default = Default.CONFIG,
        resume_errors: tuple[type[Exception], ...] = (),
    ) -> type[FunctionJob[..., t.Any]] | JobDecorator:
        """Make a job definition of a function; bare (``@solidq.job``) or with options
        (``@solidq.job(queue="low", priority=5, name="reindex")``). ``max_resumptions=``:
        how many times a job with steps may resume (see ``current_job.step``);
        ``resume_errors=``: the errors that resume it from its saved step.

        The result is a :class:`Job` subclass: calling it calls the function; it has
        ``perform_later``, ``perform_now``, ``set`` and ``new``. Type checkers see the
        function's parameters and return type on each (``FunctionJob[P, R]``).

        :raises ValueError: another job already has this name.
        """
        decorator = JobDecorator(
            queue=queue,
            priority=priority,
            name=name,
            max_resumptions=max_resumptions,
            resume_errors=resume_errors,
        )
        return decorator if function is None else decorator(function)

    @property
    def rate_limiter(self) -> RateLimiter:
        """The budgets of the current app's rate limits: ``is_limited``,
        ``time_until_available``, ``state`` and ``back_off`` (by budget key, or by job and a
        call's arguments), named budgets (``register``, ``acquire``) and
        ``clear_idle_in_batches()``."""
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

        :raises RuntimeError: inside a batch's block: after the commit the block is over, and
            the jobs would be in no batch. Enqueue them with ``perform_later`` there.
        """
        batch = current.open_batch()
        if batch is not None:
            raise RuntimeError(
                f"perform_after_commit() inside the block of batch {batch.id}: the jobs would be"
                " stored after the block, in no batch. Use perform_later (or"
                " solidq.perform_all_later), which joins the block's transaction."
            )
        jobs_list = list(jobs)
        adapters.check_arguments_all(jobs_list)  # now, in the caller, not after the commit
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

    def batch(
        self,
        on_success: Callback = None,
        on_failure: Callback = None,
        on_finish: Callback = None,
        parent: batching.Parent = None,
        **metadata: object,
    ) -> t.ContextManager[OpenBatch]:
        """A batch: the jobs enqueued inside the block (single or bulk) belong to it, and once
        none is pending its callbacks run once each (``on_success`` when no job failed for
        good, ``on_failure`` otherwise, ``on_finish`` either way), with the batch first. A
        callback is a job definition or an unenqueued job, not part of the batch. The block
        is one transaction (joining the app session's): an exception rolls back the batch and
        its jobs. ``metadata`` (JSON keywords) is kept on the batch. Opened in a running batch
        job, or with ``parent=`` (a batch or its id), it is a child: one job of its parent,
        its callbacks run before the parent's. See docs/batches.md. Yields the open batch.

        :raises TypeError: a callback isn't a job, or can't take the batch first.
        :raises flask_solidq.BatchAlreadyFinished: (as the block ends) the parent finished
            first; nothing of the block is stored.
        :raises RuntimeError: under the inline adapter.
        """
        return batching.batch(on_success, on_failure, on_finish, parent, **metadata)

    @property
    def batches(self) -> batching.Batches:
        """The current app's batches: ``find(batch_id)``, a fresh read."""
        return batching.Batches()

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
