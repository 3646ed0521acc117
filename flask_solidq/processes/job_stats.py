"""A worker's job statistics: each run counted in memory, in the bucket of the minute it ended
in, its job class and its queue, then added to ``solidq_job_stats`` by
:class:`~flask_solidq.processes.stats_flusher.StatsFlusher` every few seconds and at shutdown.

Counting costs a lock and a few additions per run, and a flush writes one row per bucket
whatever the runs in it, so the statistics cost the queue's throughput nothing it can measure.
A worker killed (SIGKILL, the host lost) loses the runs it counted since its last flush.

The supervisors keep the table small: they delete the minutes past ``SOLIDQ_STATS_RETENTION``
(:func:`prune`) and fold the minutes older than a day into their hour (:func:`compact`), as
only the week's window reads them, by the hour.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import threading
import typing as t

import sqlalchemy as sa

from flask_solidq.models.job_stats import BANDS
from flask_solidq.models.job_stats import DURATION_BANDS
from flask_solidq.models.job_stats import LATENCY_BANDS
from flask_solidq.models.tables import JOB_STATS
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.storage import db
from flask_solidq.timing import UTC

if t.TYPE_CHECKING:
    from flask_solidq.operations.outcomes import Outcome

#: A bucket's key: the minute the runs ended in, their job class and their queue.
BucketKey = tuple[dt.datetime, str, str]
#: The columns that name a bucket (``solidq_job_stats``' unique constraint).
KEY_COLUMNS = ("minute_at", "class_name", "queue_name")
#: The columns a flush keeps the greater of, where the others are added.
MAXIMA = ("duration_max", "latency_max")
#: Buckets written per statement.
ROWS_PER_WRITE = 200

#: The runs that raised.
FAILURES = frozenset({OutcomeKind.FAILED, OutcomeKind.RETRIED, OutcomeKind.DISCARDED})


def band(seconds: float) -> int:
    """The histogram band ``seconds`` falls in (see
    :data:`flask_solidq.models.job_stats.BAND_EDGES`): the bit length of the whole
    milliseconds is ``floor(log2(ms)) + 1``, without a logarithm per run."""
    return min(BANDS - 1, int(seconds * 1000).bit_length()) if seconds >= 0.001 else 0


@dataclasses.dataclass
class Bucket:
    """The runs of one bucket counted so far."""

    runs: int = 0
    failures: int = 0
    duration_total: float = 0.0
    duration_max: float = 0.0
    latency_total: float = 0.0
    latency_max: float = 0.0
    duration_bands: list[int] = dataclasses.field(default_factory=lambda: [0] * BANDS)
    latency_bands: list[int] = dataclasses.field(default_factory=lambda: [0] * BANDS)

    def add(self, *, failed: bool, duration: float, latency: float) -> None:
        """Count one run that took ``duration`` seconds and started ``latency`` seconds
        after it was due."""
        self.runs += 1
        self.failures += failed
        self.duration_total += duration
        self.duration_max = max(self.duration_max, duration)
        self.duration_bands[band(duration)] += 1
        self.latency_total += latency
        self.latency_max = max(self.latency_max, latency)
        self.latency_bands[band(latency)] += 1

    def merge(self, other: Bucket) -> None:
        """Add ``other``'s counts to this bucket's."""
        self.runs += other.runs
        self.failures += other.failures
        self.duration_total += other.duration_total
        self.duration_max = max(self.duration_max, other.duration_max)
        self.latency_total += other.latency_total
        self.latency_max = max(self.latency_max, other.latency_max)
        for index in range(BANDS):
            self.duration_bands[index] += other.duration_bands[index]
            self.latency_bands[index] += other.latency_bands[index]

    def row(self, key: BucketKey) -> dict[str, object]:
        """The bucket as a ``solidq_job_stats`` row."""
        minute_at, class_name, queue_name = key
        return {
            "minute_at": minute_at,
            "class_name": class_name,
            "queue_name": queue_name,
            "runs": self.runs,
            "failures": self.failures,
            "duration_total": self.duration_total,
            "duration_max": self.duration_max,
            "latency_total": self.latency_total,
            "latency_max": self.latency_max,
            **dict(zip(DURATION_BANDS, self.duration_bands, strict=True)),
            **dict(zip(LATENCY_BANDS, self.latency_bands, strict=True)),
        }


class JobStats:
    """The buckets a worker counted and hasn't written yet (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: By whole minutes since the epoch (a datetime is made once per bucket, in take).
        self._buckets: dict[tuple[int, str, str], Bucket] = {}

    def record(self, outcome: Outcome, *, ended_at: float, duration: float) -> None:
        """Count the run that ended in ``outcome`` at ``ended_at`` (``time.time()``) after
        ``duration`` seconds. A job a paused budget sent back before it started is no run."""
        if outcome.held_at_start:
            return
        claimed = outcome.claimed
        latency = _latency(claimed.scheduled_at, ended_at - duration)
        key = (int(ended_at // 60), claimed.class_name, claimed.queue_name)
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = Bucket()
            bucket.add(failed=outcome.kind in FAILURES, duration=duration, latency=latency)

    def take(self) -> dict[BucketKey, Bucket]:
        """The buckets counted so far, forgotten here."""
        with self._lock:
            taken, self._buckets = self._buckets, {}
        return {
            (_minute_at(minute), class_name, queue_name): bucket
            for (minute, class_name, queue_name), bucket in taken.items()
        }

    def give_back(self, buckets: dict[BucketKey, Bucket]) -> None:
        """Count ``buckets`` again (a write that failed), with what arrived since."""
        with self._lock:
            for (minute_at, class_name, queue_name), bucket in buckets.items():
                key = (int(minute_at.timestamp() // 60), class_name, queue_name)
                if key in self._buckets:
                    self._buckets[key].merge(bucket)
                else:
                    self._buckets[key] = bucket


def _latency(due_at: dt.datetime | None, started_at: float) -> float:
    """Seconds from ``due_at`` to ``started_at`` (``time.time()``); 0 for a job due later by
    this host's clock (a clock behind the database's), or of unknown due time."""
    if due_at is None:
        return 0.0
    if due_at.tzinfo is None:
        due_at = due_at.replace(tzinfo=UTC)
    return max(started_at - due_at.timestamp(), 0.0)


def _minute_at(minute: int) -> dt.datetime:
    """Whole minutes since the epoch, as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(minute * 60, UTC)


def write(engine: sa.Engine, buckets: dict[BucketKey, Bucket]) -> None:
    """Add ``buckets`` to ``solidq_job_stats``, in key order (so writers adding to the same
    rows lock them in one order), a transaction per :data:`ROWS_PER_WRITE`; tried again on
    a deadlock."""
    rows = [buckets[key].row(key) for key in sorted(buckets)]
    for chunk in db.batched(rows, ROWS_PER_WRITE):
        db.retrying_deadlocks(functools.partial(_write_rows, engine, chunk))


def _write_rows(engine: sa.Engine, rows: t.Sequence[t.Mapping[str, object]]) -> None:
    with db.write(engine) as connection:
        db.add_to_rows(connection, JOB_STATS, rows, keys=KEY_COLUMNS, maxima=MAXIMA)


def prune(engine: sa.Engine, *, before: dt.datetime) -> int:
    """Delete the buckets of the minutes before ``before``; return how many went."""
    with db.write(engine) as connection:
        deleted = connection.execute(JOB_STATS.delete().where(JOB_STATS.c.minute_at < before))
    return int(deleted.rowcount)


#: Minute buckets of hours that ended longer ago than this are folded into their hour: past
#: the last day's window, the statistics are read by the hour, and a week of hours is a
#: sixtieth of a week of minutes to read.
COMPACT_AFTER = dt.timedelta(hours=25)
#: Minute buckets folded per transaction.
COMPACT_BATCH = 5000


def compact(engine: sa.Engine, *, now: dt.datetime) -> int:
    """Fold the minute buckets of the hours that ended more than :data:`COMPACT_AFTER` ago
    (and at most a day before that) into the bucket of their hour's first minute, a batch per
    transaction; return how many were folded.

    Each batch locks the buckets it folds before reading them, so two supervisors folding at
    once never both count one bucket: the second finds it gone once the first commits."""
    cutoff = (now - COMPACT_AFTER).replace(minute=0, second=0, microsecond=0)
    folded = 0
    while True:
        count = db.retrying_deadlocks(functools.partial(_compact_batch, engine, cutoff))
        folded += count
        if count < COMPACT_BATCH:
            return folded


def _compact_batch(engine: sa.Engine, cutoff: dt.datetime) -> int:
    minute_at = JOB_STATS.c.minute_at
    query = (
        sa.select(JOB_STATS)
        .where(
            minute_at < cutoff,
            minute_at >= cutoff - dt.timedelta(days=1),
            sa.extract("minute", minute_at) != 0,
        )
        .order_by(JOB_STATS.c.id)
        .limit(COMPACT_BATCH)
        .with_for_update()
    )
    with db.write(engine) as connection:
        rows = connection.execute(query).mappings().all()
        if rows:
            db.add_to_rows(connection, JOB_STATS, _hours(rows), keys=KEY_COLUMNS, maxima=MAXIMA)
            db.delete_by_ids(connection, JOB_STATS, [row["id"] for row in rows])
    return len(rows)


def _hours(rows: t.Sequence[sa.RowMapping]) -> list[dict[str, object]]:
    """``rows`` summed per hour, job class and queue (their maxima the greatest), as the
    rows of each hour's first minute, in key order."""
    hours: dict[tuple[dt.datetime, str, str], dict[str, t.Any]] = {}
    for row in rows:
        hour = row["minute_at"].replace(minute=0)
        key = (hour, row["class_name"], row["queue_name"])
        total = hours.get(key)
        if total is None:
            hours[key] = {**row, "minute_at": hour}
            continue
        for name in _ADDED:
            total[name] += row[name]
        for name in MAXIMA:
            total[name] = max(total[name], row[name])
    return [
        {name: value for name, value in hours[key].items() if name != "id"} for key in sorted(hours)
    ]


#: The columns a fold adds up.
_ADDED = tuple(
    column.name for column in JOB_STATS.columns if column.name not in ("id", *KEY_COLUMNS, *MAXIMA)
)
