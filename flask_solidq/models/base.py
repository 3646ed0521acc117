"""The declarative base and column types shared by every flask-solidq table.

The tables live on a :class:`~sqlalchemy.MetaData` of their own, so they exist before any app
does. ``SolidQ.init_app`` copies them into the app's Flask-SQLAlchemy metadata for the queue's
bind: Alembic autogenerate then sees them (so `flask db migrate` neither drops nor re-creates
them) and ``db.create_all()`` creates them in a test database.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.orm import MappedColumn
from sqlalchemy.orm import mapped_column

from flask_solidq.timing import UTC
from flask_solidq.timing import utcnow

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(sa.types.TypeDecorator[dt.datetime]):
    """A datetime stored as naive UTC with microseconds, read back as aware UTC.

    Every database keeps the microseconds: PostgreSQL's ``timestamp`` and SQLite's text form do
    by default, MySQL needs ``DATETIME(6)``. A naive value written is taken to be UTC already.
    """

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[dt.datetime]:
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(sa.DateTime())

    def process_bind_param(
        self, value: dt.datetime | None, dialect: sa.Dialect
    ) -> dt.datetime | None:
        if value is not None and value.tzinfo is not None:
            return value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(
        self, value: dt.datetime | None, dialect: sa.Dialect
    ) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC)


#: Primary keys: BIGINT where the database has it; SQLite's rowid alias must be INTEGER.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

#: Payloads and errors: MySQL's TEXT stops at 64 KiB, so it gets LONGTEXT there.
LongText = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")

#: Keys and names: 255 is the most a unique index takes on MySQL with utf8mb4.
Key = sa.String(255)


class Base(DeclarativeBase):
    """Declarative base of the flask-solidq models."""

    metadata = metadata
    type_annotation_map = {dt.datetime: UTCDateTime()}


def primary_key() -> MappedColumn[int]:
    """An auto-incrementing BIGINT primary key."""
    return mapped_column(BigId, primary_key=True, autoincrement=True)


def job_reference(*, unique: bool = True) -> MappedColumn[int]:
    """A ``job_id`` column pointing at ``solidq_jobs``, deleted along with its job."""
    return mapped_column(
        BigId, sa.ForeignKey("solidq_jobs.id", ondelete="CASCADE"), nullable=False, unique=unique
    )


@t.overload
def timestamp(*, nullable: t.Literal[False] = False) -> MappedColumn[dt.datetime]: ...
@t.overload
def timestamp(*, nullable: bool) -> MappedColumn[dt.datetime | None]: ...
def timestamp(
    *, nullable: bool = False
) -> MappedColumn[dt.datetime] | MappedColumn[dt.datetime | None]:
    """A UTC timestamp column; ``created_at``-style columns default to now when the ORM inserts."""
    return mapped_column(UTCDateTime(), nullable=nullable, default=None if nullable else utcnow)
