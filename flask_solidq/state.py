"""Per-app state, stored in ``app.extensions["solidq"]``.

One :class:`~flask_solidq.SolidQ` object serves many apps; everything that belongs to one app
(its settings, its queue engine, whether its tables exist) lives here instead.
"""

from __future__ import annotations

import threading
import typing as t

import sqlalchemy as sa
from flask import current_app

from flask_solidq import errors
from flask_solidq import models
from flask_solidq.config import Settings
from flask_solidq.lifecycle import LifecycleHooks
from flask_solidq.storage import db
from flask_solidq.storage import engines

if t.TYPE_CHECKING:
    from flask import Flask
    from flask_sqlalchemy import SQLAlchemy


class SolidQState:
    """The flask-solidq state of one app: its settings, the queue's engines, the lifecycle
    hooks and the dashboard's access rules."""

    def __init__(
        self,
        app: Flask,
        settings: Settings,
        sqlalchemy: SQLAlchemy,
        lifecycle_hooks: LifecycleHooks | None = None,
        dashboard_rules: list[t.Callable[[], bool]] | None = None,
    ) -> None:
        self.settings = settings
        self.sqlalchemy = sqlalchemy
        #: The lifecycle hooks of the ``SolidQ`` object the app was set up with (shared by
        #: every app that object serves), which its processes run.
        self.lifecycle_hooks = lifecycle_hooks if lifecycle_hooks is not None else LifecycleHooks()
        #: The dashboard's access check registered with ``@solidq.dashboard_auth`` (a list
        #: shared with the ``SolidQ`` object, so a check registered after ``init_app``
        #: applies too; the last one registered decides).
        self.dashboard_rules = dashboard_rules if dashboard_rules is not None else []
        self.adapter = settings.adapter
        self._engine: sa.Engine | None = None
        self._claim_engine: sa.Engine | None = None
        self._tables_exist = False
        self._lock = threading.Lock()

    @property
    def engine(self) -> sa.Engine:
        """The queue's engine, built on first use from the URL of the app's bind.

        Requires an active application context the first time (Flask-SQLAlchemy's engines are
        per app).
        """
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    self._engine = self._build_engine()
        return self._engine

    @property
    def claim_engine(self) -> sa.Engine:
        """The engine workers claim jobs through (see
        :func:`flask_solidq.storage.engines.create_claim_engine`); the queue's engine on databases
        that
        need no other."""
        if self._claim_engine is None:
            engine = self.engine  # first: it takes the same lock
            with self._lock:
                if self._claim_engine is None:
                    claim_engine = None
                    if engine is not self.sqlalchemy.engines.get(self.settings.bind):
                        claim_engine = engines.create_claim_engine(
                            engine.url, _connect_args(self.settings.bind), self.connections
                        )
                    self._claim_engine = claim_engine or engine
        return self._claim_engine

    def _build_engine(self) -> sa.Engine:
        app_engine = self.sqlalchemy.engines[self.settings.bind]
        if engines.is_memory_sqlite(app_engine.url):
            # An in-memory database exists only inside its own engine's single connection.
            return app_engine
        return engines.create_queue_engine(
            app_engine.url, _connect_args(self.settings.bind), self.connections
        )

    @property
    def connections(self) -> engines.ConnectionSettings:
        """The timeouts of the queue's connections, and the pooler they go through, from the
        ``SOLIDQ_DATABASE_*`` keys."""
        listen_url = self.settings.database_listen_url
        return engines.ConnectionSettings(
            connect_timeout=self.settings.database_connect_timeout,
            dead_connection_timeout=self.settings.database_dead_connection_timeout,
            statement_timeout=self.settings.database_statement_timeout,
            pre_ping=self.settings.database_pre_ping,
            pooler=self.settings.database_pooler,
            listen_url=sa.make_url(listen_url) if listen_url is not None else None,
        )

    def own_engines(self) -> list[sa.Engine]:
        """The engines flask-solidq built (not the app's own, which in-memory SQLite shares)."""
        app_engine = self.sqlalchemy.engines.get(self.settings.bind)
        engines = {self._engine, self._claim_engine} - {None, app_engine}
        return [engine for engine in engines if engine is not None]

    def dispose(self) -> None:
        """Close the pooled connections of flask-solidq's engines (tests, shutdown)."""
        for engine in self.own_engines():
            engine.dispose()

    def check_tables(self) -> None:
        """Raise :class:`~flask_solidq.PendingMigrations` unless every flask-solidq table
        (and every column a later schema version added) exists, apart from the rate limit's
        budgets table: without it only rate-limited jobs wait (they fail closed, see
        :mod:`flask_solidq.controls.rate_limit.budget_table`), so enqueueing and workers go on. A
        positive answer is cached for the life of the process."""
        if self._tables_exist:
            return
        if not _probe_runs(self.engine):
            missing = _missing_tables(self.engine) - {models.RateLimitBudget.__tablename__}
            if missing:
                raise errors.PendingMigrations(missing)
        self._tables_exist = True


def _probe_runs(engine: sa.Engine) -> bool:
    """Whether :data:`_PROBE` runs: every table and later column is there. One round trip
    that reads no row, where reflecting the tables took tens of milliseconds, paid by each
    process's first enqueue; when it fails, :func:`_missing_tables` says what is
    missing (or raises the error that stopped it)."""
    try:
        with db.read(engine) as connection:
            connection.execute(_PROBE).all()
    except sa.exc.DBAPIError:
        return False
    return True


def _missing_tables(engine: sa.Engine) -> set[str]:
    """The flask-solidq tables, and the later columns of existing ones, the database lacks."""
    with db.read(engine) as connection:
        inspector = sa.inspect(connection)
        existing = set(inspector.get_table_names())
        missing = {table.name for table in models.TABLES} - existing
        for table, later in _LATER_COLUMNS.items():
            if table in existing:
                columns = {column["name"] for column in inspector.get_columns(table)}
                missing |= {f"{table}.{name}" for name in later - columns}
    return missing


#: Columns later schema versions added to the first version's tables, by table (version 3:
#: batches; 4: start times; 5: the budgets' admissions; 6: charges and back-offs; then the
#: process commands), checked
#: with the tables so an app that upgraded the package but not its tables is told to migrate
#: instead of meeting SQL errors.
_LATER_COLUMNS = {
    "solidq_jobs": frozenset({"batch_id", "started_at", "rate_limit_charges"}),
    "solidq_rate_limits": frozenset({"admissions", "backed_off_until"}),
    "solidq_processes": frozenset({"command"}),
}


#: Names every flask-solidq table and every later column, and reads no row.
_PROBE = sa.union_all(
    *(
        sa.select(sa.literal(1))
        .select_from(table)
        # Not sa.false(): SQLAlchemy drops what is AND-ed with it, the later columns included.
        .where(
            sa.text("1 = 0"),
            *(table.c[name].is_(None) for name in _LATER_COLUMNS.get(table.name, ())),
        )
        for table in models.TABLES
    )
)


def _connect_args(bind: str | None) -> dict[str, object]:
    """The ``connect_args`` the app gave Flask-SQLAlchemy for ``bind`` (TLS settings and the
    like), so the queue connects the way the app does. They win over the timeouts the queue
    adds (see :func:`flask_solidq.storage.engines.connection_args`)."""
    options = dict(current_app.config.get("SQLALCHEMY_ENGINE_OPTIONS") or {})
    if bind is not None:
        bind_config = (current_app.config.get("SQLALCHEMY_BINDS") or {}).get(bind)
        if isinstance(bind_config, dict):
            options.update({k: v for k, v in bind_config.items() if k != "url"})
    return dict(options.get("connect_args") or {})


def get_state() -> SolidQState:
    """The flask-solidq state of the current app.

    :raises RuntimeError: there is no app context, or the app has no flask-solidq.
    """
    try:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
    except RuntimeError:
        raise RuntimeError(
            "Working outside of application context. flask-solidq enqueues into the current"
            " app's database: push one with `with app.app_context():`."
        ) from None
    try:
        state: SolidQState = app.extensions["solidq"]
    except KeyError:
        raise RuntimeError(
            "The current Flask app has no flask-solidq. Did you call `solidq.init_app(app)`?"
        ) from None
    return state
