"""``solidq_job_stats``: runs, failures, durations and queue latency per minute, job class and
queue, written by the workers (schema version 8).

A row is one minute's bucket of one job class in one queue. Workers add to it (an upsert that
sums the counts), so a bucket is the sum of every worker's runs that ended in that minute.
Durations and latencies are kept as histograms over fixed bands that double in width
(:data:`BAND_EDGES`), which add up across buckets: any window's percentiles are estimated from
the summed bands, and its maxima are exact.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped

from flask_solidq.models.base import Base
from flask_solidq.models.base import BigId
from flask_solidq.models.base import Key
from flask_solidq.models.base import UTCDateTime
from flask_solidq.models.base import metadata

#: How many bands each histogram has.
BANDS = 24
#: The upper edges of the bands, in seconds: band 0 holds what took under 1 ms, band ``i``
#: from 2^(i-1) to 2^i ms, and the last band everything from 2^22 ms (about 70 minutes) up.
BAND_EDGES = tuple(2.0**band / 1000 for band in range(BANDS - 1))
#: The band columns of the two histograms, in band order.
DURATION_BANDS = tuple(f"duration_band_{band:02d}" for band in range(BANDS))
LATENCY_BANDS = tuple(f"latency_band_{band:02d}" for band in range(BANDS))


def _count(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.Integer, nullable=False, default=0)


def _seconds(name: str) -> sa.Column[float]:
    return sa.Column(name, sa.Double, nullable=False, default=0.0)


#: A table written out (rather than declared column by column) for its 48 band columns.
TABLE = sa.Table(
    "solidq_job_stats",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    #: The minute the runs ended in (its first instant, UTC).
    sa.Column("minute_at", UTCDateTime(), nullable=False),
    sa.Column("class_name", Key, nullable=False),
    sa.Column("queue_name", Key, nullable=False),
    #: Runs that ended (finished, failed, retried, discarded, interrupted, deferred by a 429).
    _count("runs"),
    #: Runs that raised: failed, retried or discarded.
    _count("failures"),
    #: Seconds the runs took, summed, and the longest.
    _seconds("duration_total"),
    _seconds("duration_max"),
    #: Seconds from when each run was due (enqueued, or scheduled for) to its start.
    _seconds("latency_total"),
    _seconds("latency_max"),
    *(_count(name) for name in DURATION_BANDS + LATENCY_BANDS),
    sa.UniqueConstraint("minute_at", "class_name", "queue_name"),
)


class JobStatsBucket(Base):
    """One minute of one job class's runs in one queue, as its workers counted them; the
    band columns are on :data:`TABLE` (``duration_band_00`` ... ``latency_band_23``)."""

    __table__ = TABLE

    id: Mapped[int]
    minute_at: Mapped[dt.datetime]
    class_name: Mapped[str]
    queue_name: Mapped[str]
    runs: Mapped[int]
    failures: Mapped[int]
    duration_total: Mapped[float]
    duration_max: Mapped[float]
    latency_total: Mapped[float]
    latency_max: Mapped[float]
