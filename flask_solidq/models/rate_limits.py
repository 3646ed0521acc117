"""``solidq_rate_limits``: one row per rate-limit budget."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.models.base import Base
from flask_solidq.models.base import Key
from flask_solidq.models.base import primary_key
from flask_solidq.models.base import timestamp


class RateLimitBudget(Base):
    """A budget: the GCRA state of one rate-limit key.

    ``tat`` is the theoretical arrival time of the next admission; ``last_slot_at`` the last
    time handed to a deferred job. A row whose both times have passed admits exactly as a
    missing row does, which is why idle rows can be cleared.
    """

    __tablename__ = "solidq_rate_limits"

    id: Mapped[int] = primary_key()
    key: Mapped[str] = mapped_column(Key, nullable=False, unique=True)
    tat: Mapped[dt.datetime] = timestamp()
    last_slot_at: Mapped[dt.datetime | None] = timestamp(nullable=True)
    admissions: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    #: Until when the budget admits nothing (schema version 6): an API answered 429 and a job
    #: raised ``RateLimited``, or ``rate_limiter.back_off`` was called.
    backed_off_until: Mapped[dt.datetime | None] = timestamp(nullable=True)
    created_at: Mapped[dt.datetime] = timestamp()
    updated_at: Mapped[dt.datetime] = timestamp()
