"""``SolidQ``, the Flask extension object."""

from __future__ import annotations

import contextlib
import dataclasses
import typing as t

import sqlalchemy as sa

from flask_solidq import adapters
from flask_solidq import batching
from flask_solidq import cli
from flask_solidq import config_keys
from flask_solidq import current
from flask_solidq import dashboard
from flask_solidq import models
from flask_solidq.config import DEFAULTS
from flask_solidq.config import load_settings
from flask_solidq.current import OpenBatch
from flask_solidq.definitions.calls import Call
from flask_solidq.definitions.function_job import FunctionJob
from flask_solidq.definitions.function_job import JobDecorator
from flask_solidq.definitions.job import Job as _Job
from flask_solidq.definitions.step_options import Default
from flask_solidq.lifecycle import H as _Hook
from flask_solidq.lifecycle import Lifecycle
from flask_solidq.lifecycle import LifecycleHooks
from flask_solidq.operations import actions
from flask_solidq.operations import queues
from flask_solidq.operations.batch_callbacks import Callback
from flask_solidq.rate_limiter import RateLimiter
from flask_solidq.state import SolidQState
from flask_solidq.state import get_state
from flask_solidq.storage import app_transaction
from flask_solidq.storage import db

if t.TYPE_CHECKING:
    from flask import Flask
    from flask_sqlalchemy import SQLAlchemy

P = t.ParamSpec("P")
R = t.TypeVar("R")


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

    # Lifecycle hooks: they belong to this object, like job definitions, and run in the
    # processes of every app it serves (flask_solidq.lifecycle.LifecycleHooks).

    def dashboard_auth(self, rule: t.Callable[[], bool]) -> t.Callable[[], bool]:
        """Register the dashboard's access check: ``rule()`` is called for every dashboard
        request, inside its request context, and the request is refused with 403 unless it
        returns True (``return current_user.is_authenticated and current_user.is_admin``).
        It takes precedence over ``SOLIDQ_DASHBOARD_BASIC_AUTH`` and the debug/testing
        opening. Usable as a decorator; the last check registered decides.

        :raises TypeError: ``rule`` isn't callable.
        """
        if not callable(rule):
            raise TypeError(f"@solidq.dashboard_auth registers a function, not {rule!r}.")
        self._dashboard_rules.append(rule)
        return rule

    def on_process_start(self, hook: _Hook) -> _Hook:
        """Register ``hook(process)`` to run in each queue process (worker, dispatcher,
        scheduler) as it starts, right after the fork and before it registers or works: the
        place to re-create what must not cross a fork (clients, connection pools, SDKs).

        Runs inside the app context, in the process's own thread; ``process`` is a
        :class:`~flask_solidq.lifecycle.ProcessInfo` (``kind``, ``name``, ``pid``,
        ``metadata``). In thread mode (``--mode thread``) it runs once per process thread.
        A hook that raises stops the process with the error; the supervisor logs it and
        starts the process again, as for any crash. Usable as a decorator.
        """
        return self._lifecycle_hooks.add(Lifecycle.PROCESS_START, hook)

    def on_worker_start(self, hook: _Hook) -> _Hook:
        """Register ``hook(process)`` to run in each worker once it has booted (registered,
        its threads started) and before it claims its first job; after the
        :meth:`on_process_start` hooks. As those, it runs in the app context and a hook that
        raises stops the worker with the error. Usable as a decorator.
        """
        return self._lifecycle_hooks.add(Lifecycle.WORKER_START, hook)

    def on_worker_stop(self, hook: _Hook) -> _Hook:
        """Register ``hook(process)`` to run in each worker as it stops gracefully, once its
        jobs finished (or were released after ``SOLIDQ_SHUTDOWN_TIMEOUT``) and before it
        deregisters; e.g. to flush an error tracker's queue. Runs only when the worker's
        :meth:`on_worker_start` hooks did; not on QUIT or a kill. A hook that raises makes the
        worker exit with an error, after deregistering. Usable as a decorator.
        """
        return self._lifecycle_hooks.add(Lifecycle.WORKER_STOP, hook)

    def batch(
        self,
        on_success: Callback = None,
        on_failure: Callback = None,
        on_finish: Callback = None,
        parent: batching.Parent = None,
        **metadata: t.Any,
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

    # Acting on jobs (the operations behind `flask solidq retry/discard/run-now` and the
    # dashboard's buttons; see flask_solidq.operations.actions).

    def retry(self, jobs: JobReferences) -> int:
        """Retry failed jobs: each becomes ready again (or blocked, by its concurrency
        limit), keeping its id, its attempt counters and its collected calls; its error goes.
        ``jobs``: a ``provider_job_id`` or ``job_id``, or several. Returns how many were
        retried: a job that isn't failed (any more) is not counted. Requires an app context.
        """
        engine = self._engine()
        return actions.retry(engine, actions.resolve(engine, _references(jobs)))

    def discard(self, jobs: JobReferences) -> int:
        """Delete failed, scheduled, ready or blocked jobs with their executions and
        collected calls (never a running or finished one). Returns how many were discarded.
        Requires an app context."""
        engine = self._engine()
        return actions.discard(engine, actions.resolve(engine, _references(jobs)))

    def run_now(self, jobs: JobReferences) -> int:
        """Make scheduled jobs (rate-limited ones waiting for their slot included) due now.
        Returns how many were moved. Requires an app context."""
        engine = self._engine()
        return actions.run_now(engine, actions.resolve(engine, _references(jobs)))

    def retry_all(self, **filters: t.Any) -> int:
        """Retry every failed job matching the filters: ``queue=``, ``job=`` (a job name or
        definition), ``error_class=`` (``"ValueError"`` or ``"builtins.ValueError"``),
        ``failed_before=``, ``failed_after=`` (datetimes), ``batch=`` (a batch id: its jobs
        and its children's; a retried job reopens a batch that had finished). In batches of
        500, one transaction each. Returns how many were retried. Requires an app context."""
        return actions.retry_all(self._engine(), _filters(filters))

    def discard_all(self, state: str | None = None, **filters: t.Any) -> int:
        """Discard every job in ``state`` (``"failed"``, ``"scheduled"``, ``"ready"`` or
        ``"blocked"``; by default ``"failed"``, and with ``batch=`` every scheduled, blocked
        or ready job, so the batch finishes once its running jobs have) matching the filters
        of :meth:`retry_all`. Returns how many were discarded. Requires an app context."""
        chosen = _filters(filters)
        if state is None and chosen.batch is not None:
            return actions.discard_pending(self._engine(), chosen)
        state = "failed" if state is None else state
        choice = actions.Waiting(state) if state in actions.Waiting._value2member_map_ else None
        if choice is None:
            states = ", ".join(repr(member.value) for member in actions.Waiting)
            raise ValueError(f"discard_all(state=) is one of {states}, not {state!r}.")
        return actions.discard_all(self._engine(), choice, chosen)

    def _engine(self) -> sa.Engine:
        state = get_state()
        state.check_tables()
        return state.engine


#: A job named by its ``provider_job_id`` or its ``job_id``, or several.
JobReferences: t.TypeAlias = int | str | t.Iterable[int | str]


def _references(jobs: JobReferences) -> list[int | str]:
    if isinstance(jobs, (int, str)):
        return [jobs]
    return list(jobs)


def _filters(filters: dict[str, t.Any]) -> actions.Filters:
    """The filters of a ``*_all`` action; ``job=`` may be a definition."""
    known = {field.name for field in dataclasses.fields(actions.Filters)}
    unknown = sorted(set(filters) - known)
    if unknown:
        raise TypeError(f"Unknown filter(s) {unknown}; the filters are {sorted(known)}.")
    job = filters.get("job")
    if job is not None and not isinstance(job, str):
        filters = {**filters, "job": getattr(job, "job_name", job)}
    return actions.Filters(**filters)


def _add_tables(sqlalchemy: SQLAlchemy, bind: str | None) -> None:
    """Copy the queue's tables into the app's metadata for ``bind``, so that Alembic
    autogenerate knows them (and proposes neither to drop nor to create them) and
    ``db.create_all()`` creates them."""
    target = sqlalchemy.metadatas[bind]
    for table in models.TABLES:
        if table.name not in target.tables:
            table.to_metadata(target)
