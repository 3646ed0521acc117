"""``solidq_semaphores``: one row per concurrency key, counting its free slots."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.models.base import Base
from flask_solidq.models.base import Key
from flask_solidq.models.base import primary_key
from flask_solidq.models.base import timestamp


class Semaphore(Base):
    """A concurrency key's semaphore. ``value`` is the number of free slots; the limit itself
    lives in code. ``expires_at`` is a lease: a holder that dies frees its slot at the latest
    when the lease runs out."""

    __tablename__ = "solidq_semaphores"

    id: Mapped[int] = primary_key()
    key: Mapped[str] = mapped_column(Key, nullable=False, unique=True)
    value: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=1)
    expires_at: Mapped[dt.datetime] = timestamp()
    created_at: Mapped[dt.datetime] = timestamp()
    updated_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (
        sa.Index("ix_solidq_semaphores_key_value", "key", "value"),
        sa.Index("ix_solidq_semaphores_expires_at", "expires_at"),
    )
