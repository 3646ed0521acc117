"""The job statistics read back over a window, on every backend: each job class's and
queue's runs, failures, percentiles (within the band the true value is in) and exact maxima,
the filters, and the runs per slot of a chart."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from flask_solidq.processes import job_stats as recorded
from flask_solidq.reads import job_stats

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 3, 1, 12, 30, 20, tzinfo=UTC)
THIS_MINUTE = NOW.replace(second=0)


def seed(engine: sa.Engine, runs: dict[recorded.BucketKey, list[tuple[float, float, bool]]]):
    """Buckets of runs, each ``(duration, latency, failed)``."""
    buckets = {}
    for key, each in runs.items():
        bucket = buckets[key] = recorded.Bucket()
        for duration, latency, failed in each:
            bucket.add(failed=failed, duration=duration, latency=latency)
    recorded.write(engine, buckets)


def ago(**delta: float) -> dt.datetime:
    return THIS_MINUTE - dt.timedelta(**delta)


def test_percentiles_interpolate_within_the_band_and_never_pass_the_maximum() -> None:
    bands = [0] * 24
    bands[9] = 10  # ten runs of 256 to 512 ms
    assert job_stats.percentile(bands, 0.5, 0.5) == pytest.approx(0.384)
    assert job_stats.percentile(bands, 0.95, 0.4) == 0.4
    assert job_stats.percentile([0] * 24, 0.5, 0.0) == 0.0
    last = [0] * 23 + [2]
    assert job_stats.percentile(last, 1.0, 9000.0) == 9000.0


def test_figures_per_job_class_and_queue_over_a_window(engine: sa.Engine) -> None:
    fast = [(0.003, 0.5, False)] * 18 + [(0.003, 0.5, True), (0.3, 70.0, True)]
    seed(
        engine,
        {
            (ago(minutes=5), "Report", "default"): fast,
            (ago(minutes=30), "Mail", "low"): [(2.0, 1.0, False)] * 3,
            (ago(hours=2), "Report", "default"): [(100.0, 100.0, True)],  # outside the hour
        },
    )
    since = job_stats.Window.HOUR.since(NOW)

    with engine.connect() as connection:
        report, mail = job_stats.figures(connection, since).jobs
        default, low = job_stats.figures(connection, since).queues
        only_mail = job_stats.figures(connection, since, job_stats.Filter(queue="low")).jobs
        day = job_stats.figures(connection, job_stats.Window.DAY.since(NOW)).jobs

    assert (report.name, report.runs, report.failures) == ("Report", 20, 2)
    assert report.failure_rate == 0.1
    assert 0.002 <= report.duration_p50 < 0.004  # the band of 3 ms
    assert 0.002 <= report.duration_p95 <= 0.004  # 19 of 20 runs took 3 ms
    assert (report.duration_max, report.latency_max) == (0.3, 70.0)
    assert 0.256 <= report.latency_p50 < 0.512  # the band of 0.5 s
    assert (mail.name, mail.runs, mail.failures, mail.duration_max) == ("Mail", 3, 0, 2.0)
    assert 1.024 <= mail.duration_p50 <= 2.0
    assert (default.name, default.runs, low.name, low.runs) == ("default", 20, "low", 3)
    assert [figures.name for figures in only_mail] == ["Mail"]
    assert [(figures.name, figures.runs, figures.duration_max) for figures in day] == [
        ("Report", 21, 100.0),
        ("Mail", 3, 2.0),
    ]


def test_runs_per_slot_fold_the_minutes_into_the_windows_slots(engine: sa.Engine) -> None:
    seed(
        engine,
        {
            (THIS_MINUTE, "Report", "default"): [(0.1, 0.1, False)] * 2,
            (ago(minutes=14), "Report", "default"): [(0.1, 0.1, True)],
            (ago(minutes=16), "Mail", "low"): [(0.1, 0.1, False)] * 4,
            (ago(days=6, hours=23), "Mail", "low"): [(0.1, 0.1, False)],
            (ago(days=8), "Mail", "low"): [(0.1, 0.1, False)],  # before the week
        },
    )
    with engine.connect() as connection:
        day = job_stats.runs_per_slot(connection, job_stats.Window.DAY, NOW)
        week = job_stats.runs_per_slot(connection, job_stats.Window.WEEK, NOW)
        hour = job_stats.runs_per_slot(
            connection, job_stats.Window.HOUR, NOW, job_stats.Filter(job="Report")
        )

    assert day.since == THIS_MINUTE + dt.timedelta(minutes=1) - dt.timedelta(days=1)
    assert (len(day.succeeded), day.slot) == (96, dt.timedelta(minutes=15))
    # The last quarter hour holds the minutes 12:16 to 12:30; 12:14 is in the one before.
    assert (day.succeeded[-1], day.failed[-1]) == (2, 1)
    assert (day.succeeded[-2], day.failed[-2]) == (4, 0)
    assert (len(week.succeeded), sum(week.succeeded), sum(week.failed)) == (168, 7, 1)
    assert week.succeeded[0] == 1
    assert (sum(hour.succeeded), sum(hour.failed), hour.succeeded[-1]) == (2, 1, 2)
