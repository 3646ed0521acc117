"""``solidq_processes``: the process roll, the running workers, dispatchers, schedulers and
supervisors (:mod:`flask_solidq.operations.processes` keeps it)."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.models.base import Base
from flask_solidq.models.base import BigId
from flask_solidq.models.base import Key
from flask_solidq.models.base import LongText
from flask_solidq.models.base import primary_key
from flask_solidq.models.base import timestamp


class ProcessRecord(Base):
    """A registered process. It heartbeats every ``SOLIDQ_PROCESS_HEARTBEAT_INTERVAL``; one
    silent past ``SOLIDQ_PROCESS_ALIVE_THRESHOLD`` is pruned by any supervisor; its supervisor
    carries out the ``command`` an operator wrote (quiet, stop)."""

    __tablename__ = "solidq_processes"

    id: Mapped[int] = primary_key()
    kind: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    last_heartbeat_at: Mapped[dt.datetime] = timestamp()
    supervisor_id: Mapped[int | None] = mapped_column(BigId, index=True)
    pid: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    hostname: Mapped[str | None] = mapped_column(Key)
    metadata_json: Mapped[str | None] = mapped_column("metadata", LongText)
    name: Mapped[str] = mapped_column(Key, nullable=False)
    created_at: Mapped[dt.datetime] = timestamp()
    #: What an operator asked of the process (``"quiet"`` or ``"stop"``, see
    #: :mod:`flask_solidq.operations.process_commands`); None while it just runs.
    command: Mapped[str | None] = mapped_column(sa.String(16))

    __table_args__ = (
        sa.Index("ix_solidq_processes_last_heartbeat_at", "last_heartbeat_at"),
        sa.Index("uq_solidq_processes_name_supervisor_id", "name", "supervisor_id", unique=True),
    )
