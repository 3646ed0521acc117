"""The shop's own table."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from example_app.extensions import db


class Product(db.Model):
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200))
    indexed_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True))
