"""Jobs finished and failed per slot of time (:mod:`flask_solidq.reads.activity`) on every
backend, counted exactly, and the charts that draw them: the overview's last hour of every
queue, a queue's page with its last hour and last day (test client; the browser test draws
them too, :mod:`tests.dashboard.test_dashboard_live`)."""

from __future__ import annotations

import datetime as dt
import re
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.reads import activity
from flask_solidq.timing import utcnow
from tests import support

if t.TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def add_jobs(
    engine: sa.Engine, now: dt.datetime, queue: str, ages: list[float], *, failed: bool = False
) -> None:
    """Jobs of ``queue`` that finished (or failed) ``ages`` minutes before ``now``."""
    with engine.begin() as connection:
        for age in ages:
            at = now - dt.timedelta(minutes=age)
            job_id = connection.execute(
                JOBS.insert().values(
                    queue_name=queue,
                    class_name="activity_test.job",
                    arguments="{}",
                    priority=0,
                    scheduled_at=at,
                    finished_at=None if failed else at,
                    created_at=at,
                    updated_at=at,
                )
            ).inserted_primary_key[0]
            if failed:
                connection.execute(FAILED.insert().values(job_id=job_id, error="{}", created_at=at))


def read(engine: sa.Engine, since: dt.datetime, **window: t.Any) -> activity.Activity:
    with engine.connect() as connection:
        return activity.activity(connection, since, **window)


def test_the_last_hour_counts_each_queues_finished_and_failed_jobs_per_minute(app, engine):
    since = utcnow().replace(microsecond=0) - dt.timedelta(hours=1)
    at_minute = since + dt.timedelta(minutes=60)  # ages count back from the window's end
    add_jobs(engine, at_minute, "mail", [59.5, 59.5, 30.5, 0.5, 90])
    add_jobs(engine, at_minute, "mail", [30.5, 0.25], failed=True)
    add_jobs(engine, at_minute, "other", [30.5, 10.5])
    add_jobs(engine, at_minute, "other", [0.5, 75], failed=True)

    mail = read(engine, since, slots=60, queue="mail")
    every = read(engine, since, slots=60)

    assert _nonzero(mail.finished) == {0: 2, 29: 1, 59: 1}
    assert _nonzero(mail.failed) == {29: 1, 59: 1}
    assert _nonzero(every.finished) == {0: 2, 29: 2, 49: 1, 59: 1}
    assert _nonzero(every.failed) == {29: 1, 59: 2}
    assert (mail.since, mail.slot) == (since, dt.timedelta(minutes=1))


def test_the_last_day_counts_per_quarter_hour(app, engine):
    since = utcnow().replace(microsecond=0) - dt.timedelta(days=1)
    end = since + dt.timedelta(days=1)
    add_jobs(engine, end, "mail", [24 * 60 - 1, 24 * 60 - 14, 24 * 60 - 16, 7, 1, 25 * 60])
    add_jobs(engine, end, "mail", [60 * 12 + 3], failed=True)

    day = read(engine, since, slots=96, slot_minutes=15, queue="mail")

    assert len(day.finished) == len(day.failed) == 96
    assert _nonzero(day.finished) == {0: 2, 1: 1, 95: 2}
    assert _nonzero(day.failed) == {47: 1}  # 12 h 03 min before the end: the 48th quarter
    assert day.slot == dt.timedelta(minutes=15)


def test_a_retried_job_no_longer_counts_as_failed(app, engine):
    since = utcnow() - dt.timedelta(hours=1)
    add_jobs(engine, utcnow(), "mail", [5.5, 6.5], failed=True)
    with engine.begin() as connection:
        first = connection.scalar(sa.select(sa.func.min(FAILED.c.id)))
        connection.execute(FAILED.delete().where(FAILED.c.id == first))

    assert sum(read(engine, since, slots=60).failed) == 1


def _nonzero(counts: list[int]) -> dict[int, int]:
    return {index: count for index, count in enumerate(counts) if count}


def test_a_queues_page_charts_its_last_hour_and_day_with_labelled_axes(app, engine, client):
    now = utcnow()
    add_jobs(engine, now, "mail", [0, 0, 2, 3 * 60])
    add_jobs(engine, now, "mail", [1, 5 * 60], failed=True)
    add_jobs(engine, now, "other", [0, 0, 0])

    response = client.get("/solidq/queue/mail")
    text = response.get_data(as_text=True)

    assert response.status_code == 200
    # Each chart to its figure's end (its plot is an <svg> of its own inside).
    hour, day = re.findall(r'<svg class="bars".*?</figure>', text, flags=re.S)
    assert (
        "Jobs of mail finished and failed per minute over the last hour: 3 finished, 1 failed"
        in hour
    )
    assert (
        "Jobs of mail finished and failed per quarter hour over the last day: 4 finished, 2 failed"
        in day
    )
    for svg, unit in ((hour, "Jobs per minute"), (day, "Jobs per 15 min")):
        assert ">Time (UTC)</text>" in svg
        assert f">{unit}</text>" in svg
        assert len(re.findall(r'class="tick x-tick"', svg)) == 5  # every 15 min / 6 h, both ends
    assert re.findall(r"UTC: (\d+) (finished|failed)</title>", hour) == [
        ("1", "finished"),
        ("1", "failed"),
        ("2", "finished"),
    ]


def test_a_queue_name_with_slashes_has_its_page(app, engine, client):
    add_jobs(engine, utcnow(), "/odd//name", [1])

    text = client.get("/solidq/queue//odd//name").get_data(as_text=True)

    assert "per minute over the last hour: 1 finished, 0 failed" in text


def test_the_overview_links_each_queue_to_its_page_and_charts_failures_too(app, engine, client):
    now = utcnow()
    add_jobs(engine, now, "mail", [1, 2])
    add_jobs(engine, now, "mail", [3], failed=True)

    text = client.get("/solidq/").get_data(as_text=True)

    assert 'href="/solidq/queue/mail"' in text
    assert "every queue: 2 finished, 1 failed" in text
    assert ">Time (UTC)</text>" in text and ">Jobs per minute</text>" in text
