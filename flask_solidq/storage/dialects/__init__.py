"""One module per database behind one protocol
(:class:`~flask_solidq.storage.dialects.base.Dialect`): PostgreSQL's (:mod:`.postgresql`, its
bulk enqueue in :mod:`.postgresql_bulk`), SQLite's (:mod:`.sqlite`) and MySQL/MariaDB's
(:mod:`.mysql`), the last two sharing their driver-connection fast paths (:mod:`.driver`).
:func:`dialect_of` picks one per engine."""

from __future__ import annotations

import weakref

import sqlalchemy as sa

from flask_solidq.storage.dialects import mysql
from flask_solidq.storage.dialects import postgresql
from flask_solidq.storage.dialects import sqlite
from flask_solidq.storage.dialects.base import Dialect

_BY_NAME: dict[str, Dialect] = {
    "postgresql": postgresql.DIALECT,
    "sqlite": sqlite.DIALECT,
    **dict.fromkeys(mysql.NAMES, mysql.DIALECT),
}

#: The dialect chosen for each live engine, by the engine's id: a plain dict lookup on the
#: enqueue's path (a WeakKeyDictionary makes a weak reference per lookup); an engine's entry
#: goes when the engine does, before its id can be reused.
_chosen: dict[int, Dialect] = {}


def dialect_of(engine: sa.Engine) -> Dialect:
    """The dialect of ``engine``'s database, chosen the first time it is asked for.

    :raises LookupError: the queue doesn't support ``engine``'s database.
    """
    chosen = _chosen.get(id(engine))
    if chosen is None:
        chosen = _choose(engine)
    return chosen


def _choose(engine: sa.Engine) -> Dialect:
    name = engine.dialect.name
    if name not in _BY_NAME:
        raise LookupError(f"SolidQ doesn't support the {name} database")
    chosen = _chosen[id(engine)] = _BY_NAME[name]
    weakref.finalize(engine, _chosen.pop, id(engine), None)
    return chosen
