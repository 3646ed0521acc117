"""A collecting job's calls, a page at a time (:mod:`flask_solidq.reads.coalesced_calls`), on
every backend: exact pages along the call ids, each call's arguments as stored; the job page's
section and its cursor checked like every other (the browser test pages through it too)."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.reads import coalesced_calls
from tests import support
from tests.jobs import coalesce as coalesce_jobs

if t.TYPE_CHECKING:
    from flask import Flask

CALLS = t.cast(sa.Table, models.CoalescedCall.__table__)


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


def collect(app: Flask, account: str, count: int) -> int:
    """``count`` calls collected under ``account``'s key; their job's id."""
    with app.app_context():
        jobs = [coalesce_jobs.collect.perform_later(account, index) for index in range(count)]
    (job_id,) = {job.provider_job_id for job in jobs}
    return t.cast(int, job_id)


def test_the_calls_come_oldest_first_a_page_at_a_time(app, engine):
    job_id = collect(app, "acct-1", 3)
    collect(app, "acct-2", 2)  # another job's calls stay out
    ids = [row.id for row in support.rows(engine, CALLS, CALLS.c.job_id == job_id)]

    with engine.connect() as connection:
        first = coalesced_calls.calls_page(connection, job_id, limit=2)
        second = coalesced_calls.calls_page(connection, job_id, after=first.next_after, limit=2)
        everything = coalesced_calls.calls_page(connection, job_id, limit=3)

    assert [(call.id, call.args, call.kwargs) for call in first.calls] == [
        (ids[0], ["acct-1", 0], {}),
        (ids[1], ["acct-1", 1], {}),
    ]
    assert first.next_after == ids[1]
    assert [(call.id, call.args) for call in second.calls] == [(ids[2], ["acct-1", 2])]
    assert second.next_after is None
    assert everything.next_after is None  # exactly a page: no empty page after it


def test_text_that_isnt_a_stored_call_is_shown_as_it_is(app, engine):
    job_id = collect(app, "acct-3", 1)
    with engine.begin() as connection:
        connection.execute(CALLS.update().where(CALLS.c.job_id == job_id).values(arguments="{oops"))

    with engine.connect() as connection:
        (call,) = coalesced_calls.calls_page(connection, job_id).calls

    assert (call.args, call.kwargs) == ("{oops", {})


def test_a_job_without_calls_has_no_calls_section_and_a_bad_cursor_is_refused(app, engine):
    with app.app_context():
        job_id = coalesce_jobs.dedupe.perform_later("product-1").provider_job_id
    client = app.test_client()

    assert 'id="calls"' not in client.get(f"/solidq/jobs/{job_id}").get_data(as_text=True)
    response = client.get(f"/solidq/jobs/{job_id}?calls_after=-1")
    assert response.status_code == 400
    assert "The cursor &#39;calls_after&#39;" in response.get_data(as_text=True)
