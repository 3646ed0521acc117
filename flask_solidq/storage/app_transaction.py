"""Enqueues that commit with the app's own data.

A job and the data it is about must agree: the job exists if and only if the app's
transaction that asked for it committed. So when Flask-SQLAlchemy's session has *written* in
its current transaction on the queue's database (pending changes, a flush, or an ORM
insert/update/delete), an enqueue runs on the session's connection, inside its transaction:
it is stored when the app commits and vanishes when it rolls back. When the session hasn't
written (a read-only view, a CLI script, a shell), the enqueue commits on its own at once as
before, so a job is never lost because nobody committed: Flask-SQLAlchemy's session is
always in a transaction once used, and a read-only view's is rolled back at teardown.

Joining also removes SQLite's self-deadlock: after a flush the app's connection holds the
database's only write lock, which a second connection would wait out for the busy timeout.

``SOLIDQ_ENQUEUE_IN_APP_TRANSACTION = False`` turns joining off; an explicit
``solidq.transaction()`` block is always its own transaction. With the queue on another
database nothing can make the two commits atomic: :func:`perform_after_commit` stores jobs
right after the app's session commits, and drops them if it rolls back.
"""

from __future__ import annotations

import contextlib
import typing as t

import sqlalchemy as sa
from sqlalchemy import orm

from flask_solidq.storage import db

if t.TYPE_CHECKING:
    from flask_sqlalchemy import SQLAlchemy

#: ``session.info`` key: the engines the session wrote on in its current transaction.
WRITTEN = "solidq_written_engines"
#: ``session.info`` key: callbacks to run when the session's transaction commits.
AFTER_COMMIT = "solidq_after_commit"

_listening = False


class _JoinSetting(t.Protocol):
    @property
    def enqueue_in_app_transaction(self) -> bool: ...


class AppDatabase(t.Protocol):
    """What the join reads of an app's state (a :class:`~flask_solidq.state.SolidQState`):
    whether to join, the queue's engine and the app's Flask-SQLAlchemy. A protocol, so that
    storage needs nothing from the layers above it."""

    @property
    def settings(self) -> _JoinSetting: ...

    @property
    def engine(self) -> sa.Engine: ...

    @property
    def sqlalchemy(self) -> SQLAlchemy: ...


def listen() -> None:
    """Track, on every SQLAlchemy session, the engines it writes on in each transaction
    (once per process)."""
    global _listening
    if _listening:
        return
    sa.event.listen(orm.Session, "after_flush", _after_flush)
    sa.event.listen(orm.Session, "do_orm_execute", _do_orm_execute)
    sa.event.listen(orm.Session, "after_commit", _after_commit)
    sa.event.listen(orm.Session, "after_transaction_end", _after_transaction_end)
    _listening = True


def joining(state: AppDatabase) -> t.ContextManager[bool]:
    """Inside the block, the queue's writes run in the app session's transaction when they
    should (see the module's docstring); yields whether they do.

    Most enqueues join nothing: they get a context manager that does nothing, not a
    generator's (every single enqueue enters one)."""
    connection = _app_connection(state)
    if connection is None:
        return _NOT_JOINING
    return _joined(state, connection)


#: What :func:`joining` gives when there is nothing to join (it keeps no state: reusable).
_NOT_JOINING = contextlib.nullcontext(False)


@contextlib.contextmanager
def _joined(state: AppDatabase, connection: sa.Connection) -> t.Iterator[bool]:
    """Inside the block, the queue's writes on ``state``'s engine join ``connection``, the
    app session's, and their after-commit callbacks wait for the session's commit."""
    session: orm.Session = state.sqlalchemy.session()
    callbacks = session.info.setdefault(AFTER_COMMIT, [])
    with db.joined(state.engine, connection, callbacks):
        yield True


def perform_after_commit(state: AppDatabase, enqueue: t.Callable[[], None]) -> None:
    """Run ``enqueue`` right after the app session's transaction commits (never, if it rolls
    back); at once when the session has written nothing."""
    session = _current_session(state)
    if session is None or not _written_engines(session):
        enqueue()
        return
    session.info.setdefault(AFTER_COMMIT, []).append(enqueue)


def _app_connection(state: AppDatabase) -> sa.Connection | None:
    if not state.settings.enqueue_in_app_transaction or db.in_transaction(state.engine):
        return None
    session = _current_session(state)
    if session is None:
        return None
    queue_url = state.engine.url
    for engine in _written_engines(session):
        if engine is state.engine or engine.url == queue_url:
            return session.connection(bind_arguments={"bind": engine})
    return None


def _current_session(state: AppDatabase) -> orm.Session | None:
    """The app context's session, if one was made (without making one)."""
    scoped = state.sqlalchemy.session
    if not scoped.registry.has():
        return None
    session: orm.Session = scoped()
    return session


def _written_engines(session: orm.Session) -> set[sa.Engine]:
    """The engines the session wrote on in its transaction, or will at its next flush."""
    engines = set(session.info.get(WRITTEN, ()))
    for instance in (*session.new, *session.dirty, *session.deleted):
        engines.add(_engine_of(session, sa.inspect(instance).mapper))
    return engines


# Any: an ORM execution's bind arguments, which get_bind takes as they come.
def _engine_of(
    session: orm.Session, mapper: orm.Mapper[object] | None = None, **bind_arguments: t.Any
) -> sa.Engine:
    bind = session.get_bind(mapper=mapper, **bind_arguments)
    return bind if isinstance(bind, sa.Engine) else bind.engine


def _mark(session: orm.Session, engine: sa.Engine) -> None:
    session.info.setdefault(WRITTEN, set()).add(engine)


def _after_flush(session: orm.Session, _flush_context: orm.UOWTransaction) -> None:
    for instance in (*session.new, *session.dirty, *session.deleted):
        _mark(session, _engine_of(session, sa.inspect(instance).mapper))


def _do_orm_execute(state: orm.ORMExecuteState) -> None:
    if state.is_insert or state.is_update or state.is_delete:
        _mark(state.session, _engine_of(state.session, **state.bind_arguments))


def _after_commit(session: orm.Session) -> None:
    callbacks = session.info.pop(AFTER_COMMIT, [])
    session.info.pop(WRITTEN, None)
    for callback in callbacks:
        callback()


def _after_transaction_end(session: orm.Session, transaction: orm.SessionTransaction) -> None:
    if transaction.parent is None:  # the session's own transaction ended (commit or rollback)
        session.info.pop(WRITTEN, None)
        session.info.pop(AFTER_COMMIT, None)
