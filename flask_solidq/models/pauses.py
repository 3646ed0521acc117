"""``solidq_pauses``: a row per paused queue."""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.models.base import Base
from flask_solidq.models.base import Key
from flask_solidq.models.base import primary_key
from flask_solidq.models.base import timestamp


class Pause(Base):
    """A paused queue: workers claim nothing from it until it is resumed."""

    __tablename__ = "solidq_pauses"

    id: Mapped[int] = primary_key()
    queue_name: Mapped[str] = mapped_column(Key, nullable=False, unique=True)
    created_at: Mapped[dt.datetime] = timestamp()
