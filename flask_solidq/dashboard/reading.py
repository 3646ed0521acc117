"""The dashboard's way to the queue's database: its engine, with the tables checked, and one
read-only transaction per page."""

from __future__ import annotations

import contextlib
import typing as t

from flask_solidq.state import get_state
from flask_solidq.storage import db

if t.TYPE_CHECKING:
    import sqlalchemy as sa


def engine() -> sa.Engine:
    """The queue's engine, once its tables are known to exist (a clear error otherwise)."""
    state = get_state()
    state.check_tables()
    return state.engine


@contextlib.contextmanager
def page() -> t.Iterator[sa.Connection]:
    """A read-only transaction for one page (see
    :func:`flask_solidq.storage.db.read_for_counts`)."""
    with db.read_for_counts(engine()) as connection:
        yield connection
