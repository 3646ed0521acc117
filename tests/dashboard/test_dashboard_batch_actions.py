"""A batch's page with nested batches, on every backend: its parent's link, its children
(capped, the rest on the batches list's ``?parent=`` pages), and its two actions, "Retry
failed jobs" and "Discard pending jobs" (:func:`flask_solidq.dashboard.batch_views.batch_action`),
each offered only when there is something to act on, and refused without a CSRF token, as a
GET, and for an unknown or malformed batch id. The children are read through the index on
``parent_id``."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.dashboard import batch_views
from flask_solidq.dashboard import csrf
from tests import support
from tests.batches.test_batch_actions import failed_family
from tests.batches.test_batches import batch_counts
from tests.batches.test_batches import run_all
from tests.dashboard.test_dashboard import Page
from tests.dashboard.test_dashboard import csrf_token
from tests.dashboard.test_dashboard import done_message
from tests.dashboard.test_dashboard import post
from tests.dashboard.test_dashboard_control_pages import page_text
from tests.dashboard.test_dashboard_control_pages import tables
from tests.jobs import batch as batch_jobs
from tests.support import solidq
from tests.support.concurrency import job_state

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


def retry_path(batch_id: int) -> str:
    return f"/batches/{batch_id}/retry"


def discard_path(batch_id: int) -> str:
    return f"/batches/{batch_id}/discard"


def offered(client: FlaskClient, batch_id: int) -> list[str]:
    """The batch actions its page offers (forms posting to them, each with its token)."""
    forms = Page(page_text(client, f"/solidq/batches/{batch_id}")).forms
    found = []
    for name, path in (("retry", retry_path), ("discard", discard_path)):
        fields = forms.get(f"/solidq{path(batch_id)}")
        if fields is not None:
            assert fields.get(csrf.FIELD), name
            found.append(name)
    return found


def pending_family(app: Flask) -> tuple[int, int, list[int], int]:
    """A parent with a ready and a scheduled job, a child with a scheduled job, and a ready
    job of no batch: (parent, child, their pending job ids, the loose job's id)."""
    with app.app_context():
        with solidq.batch() as parent:
            ready = batch_jobs.work.perform_later(1)
            later = batch_jobs.work.set(wait=3600).perform_later(2)
        with solidq.batch(parent=parent.id) as child:
            theirs = batch_jobs.work.set(wait=3600).perform_later(3)
        loose = batch_jobs.work.perform_later(4)
    ids = [job.provider_job_id for job in (ready, later, theirs)]
    return parent.id, child.id, ids, loose.provider_job_id


# The page: parent and children.


def test_a_child_links_its_parent_and_the_parent_lists_its_children(app, engine, client):
    parent, child, other, _failed = failed_family(app, engine)

    child_page = Page(page_text(client, f"/solidq/batches/{child}"))
    (children, *_jobs) = tables(client, f"/solidq/batches/{parent}")
    other_text = page_text(client, f"/solidq/batches/{other}")

    assert child_page.link(f"Batch {parent}") == f"/solidq/batches/{parent}"
    assert "Parent" in child_page.text
    assert [row["Id"] for row in children] == [str(child)]
    assert children[0]["Status"] == "failed"
    assert children[0]["Completed / failed / pending of total"] == "0/2/0 of 2"
    assert f'href="/solidq/batches/{child}"' in page_text(client, f"/solidq/batches/{parent}")
    assert "<dt>Parent</dt>" not in other_text and 'id="children"' not in other_text


def test_the_children_shown_are_capped_and_the_rest_are_on_the_batches_list(
    app, client, monkeypatch
):
    monkeypatch.setattr(batch_views, "CHILDREN_SIZE", 2)
    with app.app_context():
        with solidq.batch() as parent:
            batch_jobs.work.perform_later("own")
        children = []
        for index in range(3):
            with solidq.batch(parent=parent.id) as child:
                batch_jobs.work.perform_later(index)
            children.append(child.id)
        with solidq.batch():  # not a child
            batch_jobs.work.perform_later("other")

    (shown, *_jobs) = tables(client, f"/solidq/batches/{parent.id}")
    more = Page(page_text(client, f"/solidq/batches/{parent.id}")).link("More children")
    (rest,) = tables(client, more or "")
    listed = page_text(client, f"/solidq/batches?parent={parent.id}")

    assert [row["Id"] for row in shown] == [str(children[2]), str(children[1])]
    assert more == f"/solidq/batches?parent={parent.id}&before={children[1]}"
    assert [row["Id"] for row in rest] == [str(children[0])]
    assert f'Children of <a href="/solidq/batches/{parent.id}">batch {parent.id}</a>' in listed
    assert f"status=open&amp;parent={parent.id}" in listed
    assert "No children." in page_text(client, f"/solidq/batches?parent={children[0]}")
    assert client.get("/solidq/batches?parent=x").status_code == 400


def test_the_page_reads_the_children_once_and_the_family_only_when_there_may_be_work(
    app, engine, client
):
    with app.app_context():
        with solidq.batch() as done:
            batch_jobs.work.perform_later("done")
    run_all(app, engine)
    parent, _child, _ids, _loose = pending_family(app)
    reads: list[str] = []

    def note(conn: t.Any, cursor: t.Any, statement: str, *_: t.Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "solidq_" in statement:
            reads.append(statement)

    sa.event.listen(engine, "before_cursor_execute", note)
    try:
        counts = {}
        for batch_id in (done.id, parent):
            reads.clear()
            page_text(client, f"/solidq/batches/{batch_id}")
            counts[batch_id] = len(reads)
    finally:
        sa.event.remove(engine, "before_cursor_execute", note)

    states = len(batch_views.batches.JOB_STATES)
    # The batch, its jobs by state, its children; then, for the open family, its two
    # generations and one read of EXISTS conditions.
    assert counts == {done.id: 2 + states, parent: 2 + states + 3}


# The actions: offered only when there is something to act on.


def test_a_finished_batch_with_failed_jobs_in_it_or_its_child_offers_retry_only(
    app, engine, client
):
    parent, child, _other, failed = failed_family(app, engine)

    assert offered(client, parent) == ["retry"]
    assert offered(client, child) == ["retry"]
    assert 'data-confirm="Retry every failed job of batch' in page_text(
        client, f"/solidq/batches/{parent}"
    )


def test_an_open_batch_with_waiting_jobs_offers_discard_only(app, client):
    parent, child, _ids, _loose = pending_family(app)

    assert offered(client, parent) == ["discard"]
    assert offered(client, child) == ["discard"]
    assert "This deletes them" in page_text(client, f"/solidq/batches/{parent}")


def test_a_completed_batch_and_one_whose_failed_jobs_are_gone_offer_nothing(app, engine, client):
    with app.app_context():
        with solidq.batch() as done:
            batch_jobs.work.perform_later("done")
    run_all(app, engine)
    _parent, child, _other, _failed = failed_family(app, engine)
    with app.app_context():
        solidq.discard_all("failed", batch=child)

    assert batch_counts(app, done.id)[0] == "completed"
    assert batch_counts(app, child)[0] == "failed"  # its counters keep the failures
    assert offered(client, done.id) == []
    assert offered(client, child) == []


def test_a_batch_whose_only_child_has_a_failed_job_offers_retry_while_open(app, engine, client):
    with app.app_context():
        with solidq.batch() as parent:
            batch_jobs.work.set(wait=3600).perform_later("later")
        with solidq.batch(parent=parent.id):
            batch_jobs.fail.perform_later("now")
            batch_jobs.work.set(wait=3600).perform_later("later too")
    run_all(app, engine)

    assert batch_counts(app, parent.id)[3] == 0  # no failure counted in the parent yet
    assert offered(client, parent.id) == ["retry", "discard"]


# The actions: what they do.


def test_retry_failed_jobs_retries_the_familys_failed_jobs_and_reopens_it(app, engine, client):
    parent, child, other, failed = failed_family(app, engine)

    response = post(client, retry_path(parent))

    assert done_message(response) == f"Retried 3 failed jobs of batch {parent}."
    assert response.headers["Location"] == f"/solidq/batches/{parent}"
    assert [job_state(engine, job_id) for job_id in failed] == ["ready"] * 3
    assert batch_counts(app, parent)[0] == "pending"
    assert batch_counts(app, child) == ("pending", 2, 0, 0, 2)
    assert batch_counts(app, other)[0] == "failed"
    shown = client.get(response.headers["Location"]).get_data(as_text=True)
    assert f"Retried 3 failed jobs of batch {parent}." in shown
    assert offered(client, parent) == ["discard"]


def test_discard_pending_jobs_discards_the_familys_waiting_jobs_and_it_finishes(
    app, engine, client
):
    parent, child, ids, loose = pending_family(app)

    response = post(client, discard_path(parent))

    assert done_message(response) == f"Discarded 3 pending jobs of batch {parent}."
    assert response.headers["Location"] == f"/solidq/batches/{parent}"
    assert [job_state(engine, job_id) for job_id in ids] == ["gone"] * 3
    assert job_state(engine, loose) == "ready"
    assert batch_counts(app, child) == ("completed", 1, 1, 0, 0)
    assert batch_counts(app, parent) == ("completed", 3, 3, 0, 0)
    assert offered(client, parent) == []


def test_an_action_with_nothing_to_do_says_none(app, engine, client):
    with app.app_context():
        with solidq.batch() as done:
            batch_jobs.work.perform_later("done")
    run_all(app, engine)

    assert done_message(post(client, retry_path(done.id))) == (
        f"Retried 0 failed jobs of batch {done.id}."
    )
    assert done_message(post(client, discard_path(done.id))) == (
        f"Discarded 0 pending jobs of batch {done.id}."
    )


# The actions: refused.


@pytest.mark.parametrize("path", [retry_path, discard_path])
def test_an_action_without_the_token_or_as_a_get_is_refused_and_changes_nothing(
    app, engine, client, path
):
    parent, _child, _other, failed = failed_family(app, engine)
    loose = pending_family(app)[2]
    token = csrf_token(client)
    stranger = app.test_client()

    refusals = [
        client.post("/solidq" + path(parent)),
        client.post("/solidq" + path(parent), data={csrf.FIELD: "wrong"}),
        stranger.post("/solidq" + path(parent), data={csrf.FIELD: token}),
    ]

    assert [response.status_code for response in refusals] == [400, 400, 400]
    assert client.get("/solidq" + path(parent)).status_code == 405
    assert [job_state(engine, job_id) for job_id in failed] == ["failed"] * 3
    assert job_state(engine, loose[0]) == "ready"


@pytest.mark.parametrize("path", [retry_path, discard_path])
def test_an_action_on_an_unknown_or_malformed_batch_is_refused(app, engine, client, path):
    _parent, _child, _other, failed = failed_family(app, engine)

    missing = post(client, path(999_999_999))
    malformed = post(client, path("abc"))  # type: ignore[arg-type]
    too_big = post(client, path(2**63))

    assert missing.status_code == 404
    assert malformed.status_code == 400 and "is not a batch id" in malformed.text
    assert too_big.status_code == 400
    assert [job_state(engine, job_id) for job_id in failed] == ["failed"] * 3


def test_the_children_read_seeks_the_parent_id_index(app, engine):
    """The statement ``list_batches(parent=...)`` sends, as each backend plans it."""
    statements: list[tuple[str, t.Any]] = []

    def note(conn: t.Any, cursor: t.Any, statement: str, parameters: t.Any, *_: t.Any) -> None:
        statements.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", note)
    try:
        with engine.connect() as connection:
            batch_views.batches.list_batches(connection, parent=5, limit=50)
    finally:
        sa.event.remove(engine, "before_cursor_execute", note)
    ((statement, parameters),) = statements
    explain = "EXPLAIN QUERY PLAN " if engine.dialect.name == "sqlite" else "EXPLAIN "

    with engine.connect() as connection:
        plan = str(connection.exec_driver_sql(explain + statement, parameters).all())

    assert "ix_solidq_batches_parent_id" in plan, plan
