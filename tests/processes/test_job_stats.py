"""The workers' job statistics on every backend: a run counted in its minute's bucket, a
write that adds to the bucket already stored (maxima kept, bands summed), two processes
writing the same buckets at once losing no count, and the pruning of old minutes."""

from __future__ import annotations

import datetime as dt
import sys
import textwrap
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.models.job_stats import DURATION_BANDS
from flask_solidq.models.job_stats import LATENCY_BANDS
from flask_solidq.models.tables import JOB_STATS
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.processes import job_stats
from flask_solidq.values import ClaimedJob
from tests import support
from tests.support import processes
from tests.support.runtime import ROOT

UTC = dt.timezone.utc
MINUTE = dt.datetime(2026, 3, 1, 12, 30, tzinfo=UTC)


def claimed(class_name: str = "Report", queue: str = "default", due: dt.datetime | None = None):
    return ClaimedJob(1, None, class_name, queue, 0, None, None, None, scheduled_at=due)


def outcome(kind: OutcomeKind = OutcomeKind.FINISHED, **job: t.Any) -> Outcome:
    return Outcome(claimed(**job), kind)


def stored(engine: sa.Engine) -> list[dict[str, t.Any]]:
    with engine.connect() as connection:
        rows = connection.execute(sa.select(JOB_STATS).order_by(JOB_STATS.c.id)).mappings()
        return [dict(row) for row in rows]


def bands(row: t.Mapping[str, t.Any], names: tuple[str, ...]) -> dict[int, int]:
    """The bands of a histogram that counted something, by index."""
    return {index: row[name] for index, name in enumerate(names) if row[name]}


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(0.0, 0), (0.0009, 0), (0.001, 1), (0.0015, 1), (0.002, 2), (0.3, 9), (100.0, 17), (1e9, 23)],
)
def test_a_duration_falls_in_the_band_whose_edges_double(seconds: float, expected: int) -> None:
    assert job_stats.band(seconds) == expected


def test_runs_are_counted_by_the_minute_they_ended_in_their_class_and_queue() -> None:
    stats = job_stats.JobStats()
    due = MINUTE - dt.timedelta(seconds=30)
    ended = MINUTE + dt.timedelta(seconds=40)
    stats.record(outcome(due=due), ended_at=ended.timestamp(), duration=0.3)
    stats.record(outcome(OutcomeKind.RETRIED, due=due), ended_at=ended.timestamp(), duration=0.003)
    stats.record(outcome(queue="low"), ended_at=ended.timestamp(), duration=0.003)
    stats.record(
        outcome(OutcomeKind.FINISHED),
        ended_at=(ended + dt.timedelta(minutes=1)).timestamp(),
        duration=1,
    )
    held = Outcome(claimed(), OutcomeKind.DEFERRED, held_at_start=True)
    stats.record(held, ended_at=ended.timestamp(), duration=0.0)  # never started: no run

    taken = stats.take()

    assert sorted(taken) == [
        (MINUTE, "Report", "default"),
        (MINUTE, "Report", "low"),
        (MINUTE + dt.timedelta(minutes=1), "Report", "default"),
    ]
    bucket = taken[(MINUTE, "Report", "default")]
    assert (bucket.runs, bucket.failures, bucket.duration_max) == (2, 1, 0.3)
    assert bucket.duration_bands[9] == bucket.duration_bands[2] == 1
    # Started 40.3 s and 40.003 s after the minute began, due 30 s before it.
    assert bucket.latency_max == pytest.approx(70.0, abs=0.01)
    assert bucket.latency_bands[17] == 2
    assert stats.take() == {}


def test_a_write_adds_to_the_stored_bucket_and_keeps_the_greater_maxima(engine: sa.Engine) -> None:
    key = (MINUTE, "Report", "default")
    first, second = job_stats.Bucket(), job_stats.Bucket()
    first.add(failed=False, duration=0.3, latency=2.0)
    second.add(failed=True, duration=0.003, latency=5.0)
    second.add(failed=False, duration=0.004, latency=0.0005)

    job_stats.write(engine, {key: first})
    job_stats.write(engine, {key: second})

    (row,) = stored(engine)
    assert (row["minute_at"], row["class_name"], row["queue_name"]) == key
    assert (row["runs"], row["failures"]) == (3, 1)
    assert (row["duration_max"], row["latency_max"]) == (0.3, 5.0)
    assert row["duration_total"] == pytest.approx(0.307)
    assert row["latency_total"] == pytest.approx(7.0005)
    assert bands(row, DURATION_BANDS) == {9: 1, 2: 1, 3: 1}
    # 2 s in [1.024, 2.048), 5 s in [4.096, 8.192), 0.5 ms under 1 ms.
    assert bands(row, LATENCY_BANDS) == {11: 1, 13: 1, 0: 1}


#: A process that adds one run to each of three buckets, ``WRITES`` times, a transaction each.
WRITER = textwrap.dedent(
    """
    import datetime as dt, sys
    import sqlalchemy as sa
    from flask_solidq.processes import job_stats
    engine = sa.create_engine(sys.argv[1])
    minute = dt.datetime(2026, 3, 1, 12, 30, tzinfo=dt.timezone.utc)
    for write in range(int(sys.argv[2])):
        buckets = {}
        for queue in ("a", "b", "c"):
            bucket = buckets[(minute, "Report", queue)] = job_stats.Bucket()
            bucket.add(failed=write % 2 == 0, duration=write / 1000, latency=0.0)
        job_stats.write(engine, buckets)
    """
)
WRITES = 60


@pytest.mark.processes
def test_two_processes_adding_to_the_same_buckets_at_once_lose_no_count(
    engine: sa.Engine, database_url: str
) -> None:
    writers = [
        processes.start([sys.executable, "-c", WRITER, database_url, str(WRITES)], cwd=ROOT)
        for _ in range(2)
    ]
    try:
        assert [writer.wait(60) for writer in writers] == [0, 0]
    finally:
        for writer in writers:
            processes.end(writer)

    rows = sorted(stored(engine), key=lambda row: row["queue_name"])
    assert [row["queue_name"] for row in rows] == ["a", "b", "c"]
    for row in rows:
        assert (row["runs"], row["failures"]) == (2 * WRITES, WRITES)
        assert sum(row[name] for name in DURATION_BANDS) == 2 * WRITES
        assert row["duration_max"] == (WRITES - 1) / 1000


def test_pruning_deletes_the_minutes_before_the_cutoff_only(engine: sa.Engine) -> None:
    old, recent = job_stats.Bucket(), job_stats.Bucket()
    old.add(failed=False, duration=1, latency=1)
    recent.add(failed=False, duration=1, latency=1)
    job_stats.write(
        engine,
        {
            (MINUTE - dt.timedelta(days=8), "Report", "default"): old,
            (MINUTE, "Report", "default"): recent,
        },
    )

    assert job_stats.prune(engine, before=MINUTE - dt.timedelta(days=7)) == 1

    assert [row["minute_at"] for row in stored(engine)] == [MINUTE]
    assert support.count(engine, JOB_STATS) == 1


def test_compacting_folds_the_minutes_older_than_a_day_into_their_hour(engine: sa.Engine) -> None:
    now = dt.datetime(2026, 3, 1, 12, 30, 20, tzinfo=UTC)
    hour = dt.datetime(2026, 2, 28, 10, tzinfo=UTC)  # ended 25.5 hours before now
    runs = {
        (hour, "Report", "default"): (0.001, 1.0),
        (hour + dt.timedelta(minutes=5), "Report", "default"): (0.3, 0.5),
        (hour + dt.timedelta(minutes=59), "Report", "default"): (0.003, 9.0),
        (hour + dt.timedelta(minutes=30), "Report", "low"): (2.0, 0.1),
        (hour + dt.timedelta(minutes=65), "Report", "default"): (1.0, 1.0),  # a recent hour
        (hour - dt.timedelta(days=2, minutes=-5), "Report", "default"): (1.0, 1.0),  # too old
    }
    buckets = {}
    for key, (duration, latency) in runs.items():
        bucket = buckets[key] = job_stats.Bucket()
        bucket.add(failed=duration > 1, duration=duration, latency=latency)
    job_stats.write(engine, buckets)

    assert job_stats.compact(engine, now=now) == 3
    assert job_stats.compact(engine, now=now) == 0

    rows = {(row["minute_at"], row["queue_name"]): row for row in stored(engine)}
    assert sorted(rows) == [
        (hour - dt.timedelta(days=2, minutes=-5), "default"),
        (hour, "default"),
        (hour, "low"),
        (hour + dt.timedelta(minutes=65), "default"),
    ]
    folded = rows[(hour, "default")]
    assert (folded["runs"], folded["failures"]) == (3, 0)
    assert (folded["duration_max"], folded["latency_max"]) == (0.3, 9.0)
    assert folded["duration_total"] == pytest.approx(0.304)
    assert bands(folded, DURATION_BANDS) == {1: 1, 9: 1, 2: 1}
    assert bands(folded, LATENCY_BANDS) == {10: 1, 9: 1, 14: 1}
    low = rows[(hour, "low")]
    assert (low["runs"], low["failures"], low["duration_max"]) == (1, 1, 2.0)
