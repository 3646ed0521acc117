"""The dashboard's batch pages (:mod:`flask_solidq.dashboard.batch_views`) with the test client
on every backend: the list with its filters, progress and paging, a batch's page with its jobs
by state, a job's link to its batch. The batches are made through ``solidq.batch()`` and run
through the real claim, perform and finish operations (as tests/batches/test_batches.py
does), then the pages are read cell by cell."""

from __future__ import annotations

import re
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.dashboard import batch_views
from flask_solidq.definitions.batches import Batch
from flask_solidq.reads import batches as batch_reads
from flask_solidq.timing import utcnow
from tests import support
from tests.batches.test_batches import run_all
from tests.dashboard.test_dashboard_control_pages import page_text
from tests.dashboard.test_dashboard_control_pages import tables
from tests.jobs import batch as batch_jobs
from tests.support import solidq

if t.TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    """An app with the dashboard open (testing mode)."""
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[None]:
    batch_jobs.PERFORMED.clear()
    yield
    batch_jobs.PERFORMED.clear()


def failed_batch(app: Flask, engine: t.Any) -> tuple[int, dict[str, int]]:
    """A batch of two jobs that complete and one that fails for good, run to its end (the
    finished jobs kept); its id and its jobs' ids by name."""
    with app.app_context():
        with solidq.batch(
            on_success=batch_jobs.callback.new("success"),
            on_finish=batch_jobs.callback.new("finish"),
            label="catalog",
        ) as batch:
            first = batch_jobs.work.perform_later(1)
            second = batch_jobs.work.perform_later(2)
            failing = batch_jobs.fail.perform_later(3)
    run_all(app, engine, preserve_finished=True)
    ids = {"first": first, "second": second, "failing": failing}
    return batch.id, {name: job.provider_job_id for name, job in ids.items()}


def open_batch(app: Flask) -> tuple[int, dict[str, int]]:
    """A batch with a ready job and a scheduled one, and metadata without a label."""
    with app.app_context():
        with solidq.batch(owner="ops", size=2) as batch:
            ready = batch_jobs.work.perform_later("r")
            later = batch_jobs.work.set(wait=600).perform_later("s")
    return batch.id, {"ready": ready.provider_job_id, "scheduled": later.provider_job_id}


def test_batches_lists_each_batch_newest_first_with_its_progress_callbacks_and_ages(
    app, engine, client
):
    finished_id, _ = failed_batch(app, engine)
    open_id, _ = open_batch(app)

    (listed,) = tables(client, "/solidq/batches")

    assert [row["Id"] for row in listed] == [str(open_id), str(finished_id)]
    open_row, finished_row = listed
    assert finished_row["Metadata"] == "catalog"
    assert finished_row["Status"] == "failed"
    assert finished_row["Completed / failed / pending of total"] == "2/1/0 of 3"
    assert finished_row["Callbacks"].startswith("on_success: batch_test.callback")
    assert re.fullmatch(r"\d+s ago", finished_row["Finished"])
    assert open_row["Metadata"] == 'owner="ops", size=2'
    assert open_row["Status"] == "pending"
    assert open_row["Completed / failed / pending of total"] == "0/0/2 of 2"
    assert open_row["Callbacks"] == "-"
    assert re.fullmatch(r"\d+s ago", open_row["Enqueued"]) and open_row["Finished"] == "-"


def test_the_callbacks_cell_names_each_kind(app, engine, client):
    failed_batch(app, engine)

    text = page_text(client, "/solidq/batches")

    assert "on_success: batch_test.callback<br>on_finish: batch_test.callback" in text


def test_the_progress_bar_is_svg_with_a_segment_per_counter_and_no_inline_style(
    app, engine, client
):
    finished_id, _ = failed_batch(app, engine)

    text = page_text(client, f"/solidq/batches/{finished_id}")

    assert '<rect class="completed" x="0" y="0" width="66.67"' in text
    assert '<rect class="failed" x="66.67" y="0" width="33.33"' in text
    assert 'class="pending"' not in text
    assert "style=" not in text and "<script>" not in text


def test_progress_shares_add_up_and_an_empty_batch_has_no_bar():
    def batch(total: int, completed: int, failed: int, pending: int) -> Batch:
        return Batch(
            id=1,
            total_jobs=total,
            completed_jobs=completed,
            failed_jobs=failed,
            pending_jobs=pending,
            metadata={},
            callbacks={},
            created_at=utcnow(),
            enqueued_at=utcnow(),
            finished_at=None,
            failed_at=None,
        )

    assert batch_views.progress(batch(4, 1, 1, 2)) == batch_views.Progress(25.0, 25.0, 50.0)
    assert batch_views.progress(batch(4, 1, 1, 2)).pending_x == 50.0
    assert batch_views.progress(batch(0, 0, 0, 0)) == batch_views.Progress(0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("status", "which"), [("open", ["open"]), ("finished", ["failed"]), ("failed", ["failed"])]
)
def test_the_status_filter_lists_only_the_batches_it_names(app, engine, client, status, which):
    ids = {"failed": failed_batch(app, engine)[0], "open": open_batch(app)[0]}

    (listed,) = tables(client, f"/solidq/batches?status={status}") or ([],)

    assert [row["Id"] for row in listed] == [str(ids[name]) for name in which]


def test_a_filter_no_batch_matches_says_so_and_an_unknown_one_is_404(app, engine, client):
    open_batch(app)

    assert "No failed batches." in page_text(client, "/solidq/batches?status=failed")
    assert client.get("/solidq/batches?status=bogus").status_code == 404


def test_the_list_pages_on_the_id(app, engine, client, monkeypatch):
    monkeypatch.setattr(batch_views, "PAGE_SIZE", 2)
    ids = [open_batch(app)[0] for _ in range(3)]

    (first,) = tables(client, "/solidq/batches")
    text = page_text(client, "/solidq/batches")
    (second,) = tables(client, f"/solidq/batches?before={ids[1]}")

    assert [row["Id"] for row in first] == [str(ids[2]), str(ids[1])]
    assert f"before={ids[1]}" in text
    assert [row["Id"] for row in second] == [str(ids[0])]


def test_a_batch_page_shows_its_counters_callbacks_metadata_and_jobs_by_state(app, engine, client):
    batch_id, jobs = failed_batch(app, engine)

    text = page_text(client, f"/solidq/batches/{batch_id}")
    failed, finished = tables(client, f"/solidq/batches/{batch_id}")

    assert f"Batch {batch_id}" in text
    assert "<dt>Completed</dt><dd>2</dd>" in text and "<dt>Failed</dt><dd>1</dd>" in text
    assert "<dt>Callback on_success</dt><dd>batch_test.callback</dd>" in text
    assert "&#34;label&#34;: &#34;catalog&#34;" in text or '"label": "catalog"' in text
    assert [row["Id"] for row in failed] == [str(jobs["failing"])]
    assert failed[0]["Error"].startswith("tests.jobs.batch.Boom: failing 3")
    assert [row["Id"] for row in finished] == [str(jobs["second"]), str(jobs["first"])]
    assert f'href="/solidq/jobs/{jobs["failing"]}"' in text
    assert "No claimed, ready, blocked, scheduled or deferred jobs." in text


def test_an_open_batchs_page_lists_its_ready_and_scheduled_jobs_and_refreshes(app, engine, client):
    batch_id, jobs = open_batch(app)

    text = page_text(client, f"/solidq/batches/{batch_id}")
    ready, scheduled = tables(client, f"/solidq/batches/{batch_id}")

    assert [row["Id"] for row in ready] == [str(jobs["ready"])]
    assert [row["Id"] for row in scheduled] == [str(jobs["scheduled"])]
    assert 'hx-trigger="every 3s"' in text
    assert "No failed, claimed, blocked, deferred or finished jobs (finished jobs are kept" in text


def test_one_state_of_a_batch_pages_on_the_id(app, engine, client, monkeypatch):
    monkeypatch.setattr(batch_views, "STATE_PAGE_SIZE", 2)
    with app.app_context():
        with solidq.batch() as batch:
            ids = [batch_jobs.work.perform_later(index).provider_job_id for index in range(3)]
        batch_jobs.work.perform_later("outside")

    (first,) = tables(client, f"/solidq/batches/{batch.id}?state=ready")
    text = page_text(client, f"/solidq/batches/{batch.id}?state=ready")
    (second,) = tables(client, f"/solidq/batches/{batch.id}?state=ready&before={ids[1]}")

    assert [row["Id"] for row in first] == [str(ids[2]), str(ids[1])]
    assert f"state=ready&amp;before={ids[1]}" in text
    assert [row["Id"] for row in second] == [str(ids[0])]


def test_a_missing_batch_is_404_and_a_bad_id_or_state_is_refused(app, client):
    assert client.get("/solidq/batches/999999").status_code == 404
    response = client.get("/solidq/batches/abc")
    assert response.status_code == 400
    assert "is not a batch id" in response.get_data(as_text=True)
    batch_id, _ = open_batch(app)
    assert client.get(f"/solidq/batches/{batch_id}?state=bogus").status_code == 404
    assert client.get(f"/solidq/batches/{batch_id}?before=x").status_code == 400


def test_a_jobs_page_links_its_batch_and_a_job_without_one_has_no_link(app, client):
    batch_id, jobs = open_batch(app)
    with app.app_context():
        alone = batch_jobs.work.perform_later("alone")

    text = page_text(client, f"/solidq/jobs/{jobs['ready']}")
    other = page_text(client, f"/solidq/jobs/{alone.provider_job_id}")

    assert f'<a href="/solidq/batches/{batch_id}">Batch {batch_id}</a>' in text
    assert "/solidq/batches/" not in other.replace('href="/solidq/batches"', "")


def test_every_page_has_a_batches_nav_entry(client):
    assert '<a href="/solidq/batches">Batches</a>' in page_text(client, "/solidq/")


def test_a_batch_page_costs_one_read_of_the_batch_and_one_per_state_whatever_its_size(
    app, engine, client
):
    with app.app_context():
        with solidq.batch() as small:
            batch_jobs.work.perform_later("one")
        with solidq.batch() as large:
            for index in range(3 * batch_views.GROUP_SIZE):
                batch_jobs.work.perform_later(index)
    reads: list[str] = []

    def note(conn: t.Any, cursor: t.Any, statement: str, *_: t.Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "solidq_" in statement:
            reads.append(statement)

    sa.event.listen(engine, "before_cursor_execute", note)
    try:
        counts = []
        for batch in (small, large):
            reads.clear()
            (ready,) = tables(client, f"/solidq/batches/{batch.id}")
            counts.append((len(ready), len(reads)))
        reads.clear()
        tables(client, "/solidq/batches")
        listed = len(reads)
    finally:
        sa.event.remove(engine, "before_cursor_execute", note)

    # The batch, its jobs by state, its children; being open, its family (one generation)
    # and whether it has failed or waiting jobs.
    states = len(batch_reads.JOB_STATES)
    assert counts == [(1, 4 + states), (batch_views.GROUP_SIZE, 4 + states)]
    assert listed == 1


def test_metadata_is_escaped_on_both_pages(app, client):
    hostile = '<script>alert("x")</script>'
    with app.app_context():
        with solidq.batch(label=hostile, **{"<b>key</b>": hostile}) as batch:
            batch_jobs.work.perform_later(1)

    for path in ("/solidq/batches", f"/solidq/batches/{batch.id}"):
        text = page_text(client, path)
        assert "<script>alert" not in text and "<b>key" not in text, path
    assert "&lt;script&gt;alert(" in page_text(client, "/solidq/batches")
