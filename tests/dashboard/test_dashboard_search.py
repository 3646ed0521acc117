"""The jobs list's search and selected rows, through Flask's test client and the reads
(:mod:`flask_solidq.reads.search`), on every backend.

Search: an id, a ``job_id``, a text of the arguments or (failed jobs) the error, combined
with the state, queue and job filters; a text search reads a bounded number of jobs a page,
says so, and pages on; the filters offer the names that exist. Selected rows: retried or
discarded in the list's state only, saying how many were and how many no longer were; bad
input and a missing CSRF token answer 400 and change nothing.
"""

from __future__ import annotations

import re
import typing as t

import pytest

from flask_solidq.dashboard import csrf
from flask_solidq.operations import actions
from flask_solidq.reads import browse
from flask_solidq.reads import job_detail
from flask_solidq.reads import search
from tests.dashboard import test_dashboard as dashboard_tests
from tests.dashboard.test_dashboard import PREFIX
from tests.dashboard.test_dashboard import csrf_token
from tests.dashboard.test_dashboard import done_message
from tests.dashboard.test_dashboard import failed_job
from tests.dashboard.test_dashboard import get
from tests.dashboard.test_dashboard import post
from tests.jobs import dashboard as jobs
from tests.operations.test_job_actions import enqueue
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient
    from werkzeug.test import TestResponse

# The dashboard tests' fixtures: the dashboard on, a request context per request, the job
# module's failures cleared.
clean_job_module = dashboard_tests.clean_job_module
app = dashboard_tests.app
_push_request_context = dashboard_tests._push_request_context
client = dashboard_tests.client


def active_job_id(app: Flask, job_id: int) -> str:
    with app.app_context(), app.extensions["solidq"].engine.connect() as connection:
        detail = job_detail.find_job(connection, job_id)
    assert detail is not None and detail.summary.active_job_id is not None
    return detail.summary.active_job_id


# Search.


def test_a_search_for_an_id_finds_that_job_in_its_state_only(app, engine, client):
    failed = failed_job(app, engine, "broken")
    ready = enqueue(app, jobs.task, "waiting")
    assert get(client, f"/jobs?state=failed&q={failed}").job_ids() == [failed]
    assert get(client, f"/jobs?state=failed&q={ready}").job_ids() == []
    assert get(client, f"/jobs?state=ready&q={ready}").job_ids() == [ready]
    assert "No ready jobs matching." in get(client, f"/jobs?state=ready&q={failed}").text


def test_a_search_for_a_job_id_finds_that_job_whatever_its_case(app, engine, client):
    ready = enqueue(app, jobs.task, "waiting")
    enqueue(app, jobs.task, "another")
    uuid = active_job_id(app, ready)
    assert get(client, f"/jobs?state=ready&q={uuid}").job_ids() == [ready]
    assert get(client, f"/jobs?state=ready&q=%20{uuid.upper()}%20").job_ids() == [ready]


def test_a_text_is_found_in_the_error_of_failed_jobs_and_the_arguments(app, engine, client):
    first = failed_job(app, engine, "Alpha-report")
    second = failed_job(app, engine, "beta-report")
    third = failed_job(app, engine, "gamma")
    # The error says "... failed on purpose for <note>"; the arguments hold the note too.
    assert get(client, "/jobs?state=failed&q=alpha-REPORT").job_ids() == [first]
    assert get(client, "/jobs?state=failed&q=report").job_ids() == [second, first]
    assert get(client, "/jobs?state=failed&q=on%20purpose").job_ids() == [third, second, first]
    # LIKE's wildcards are taken as themselves.
    assert get(client, "/jobs?state=failed&q=%25").job_ids() == []
    assert get(client, "/jobs?state=failed&q=a_report").job_ids() == []


def test_a_number_in_double_quotes_is_looked_for_as_text(app, engine, client):
    numbered = enqueue(app, jobs.task, "order 987654")
    enqueue(app, jobs.task, "order 1")
    assert get(client, '/jobs?state=ready&q="987654"').job_ids() == [numbered]
    assert get(client, "/jobs?state=ready&q=987654").job_ids() == []  # an id no job has


def test_during_a_search_the_all_actions_are_not_offered_the_selected_ones_are(app, engine, client):
    failed_job(app, engine, "broken")
    plain = get(client, "/jobs?state=failed")
    searched = get(client, "/jobs?state=failed&q=broken")
    assert f"{PREFIX}/failed/retry" in plain.forms
    assert f"{PREFIX}/failed/retry" not in searched.forms
    assert searched.forms[f"{PREFIX}/selected/discard"]["q"] == "broken"


def test_a_text_search_keeps_the_state_queue_and_job_filters(app, engine, client):
    alpha = enqueue(app, jobs.task, "invoice-7", queue="alpha")
    beta = enqueue(app, jobs.task, "invoice-7", queue="beta")
    other = enqueue(app, jobs.other, "invoice-7", queue="alpha")
    later = enqueue(app, jobs.task, "invoice-7", queue="alpha", wait=3600)
    enqueue(app, jobs.task, "invoice-8", queue="alpha")
    assert get(client, "/jobs?state=ready&q=invoice-7").job_ids() == [other, beta, alpha]
    assert get(client, "/jobs?state=ready&q=invoice-7&queue=alpha").job_ids() == [other, alpha]
    filtered = get(client, "/jobs?state=ready&q=invoice-7&queue=alpha&job=dashboard_test.task")
    assert filtered.job_ids() == [alpha]
    assert get(client, "/jobs?state=scheduled&q=invoice-7").job_ids() == [later]


def test_a_text_search_reads_at_most_its_bound_says_so_and_links_the_next_jobs(
    app, engine, client, monkeypatch
):
    matches = [enqueue(app, jobs.task, f"match-{index}") for index in range(2)]
    fillers = [enqueue(app, jobs.task, f"filler-{index}") for index in range(3)]
    monkeypatch.setattr(search, "SCAN_LIMIT", 3)
    first = get(client, "/jobs?state=ready&q=match")
    assert first.job_ids() == []
    assert "Searched the newest 3 jobs of this filter; narrow it to search further" in first.text
    assert "No ready jobs matching in the jobs searched." in first.text
    following = first.link("search the next 3")
    assert following == f"{PREFIX}/jobs?state=ready&q=match&before={fillers[0]}"
    second = get(client, following.removeprefix(PREFIX))
    assert second.job_ids() == matches[::-1]
    assert "Searched the newest" not in second.text
    assert second.link("Next page") is None


def test_a_search_pages_on_by_keyset_within_its_bound(app, engine):
    ids = [enqueue(app, jobs.task, f"page-{index}") for index in range(5)]
    where = search.Filter(browse.State.READY)
    with engine.connect() as connection:
        first = search.search(connection, where, "page", limit=2, scan=4)
        second = search.search(connection, where, "page", before=first.next_before, limit=2, scan=4)
        third = search.search(connection, where, "page", before=second.next_before, limit=2, scan=4)
    assert [job.id for job in first.jobs] == [ids[4], ids[3]]
    assert (first.bounded, first.next_before) == (False, ids[3])
    assert [job.id for job in second.jobs] == [ids[2], ids[1]]
    assert [job.id for job in third.jobs] == [ids[0]]
    assert (third.scanned, third.bounded, third.next_before) == (1, False, None)


def test_the_filters_offer_the_queue_and_job_names_that_exist(app, engine, client):
    enqueue(app, jobs.task, "a", queue="zeta")
    enqueue(app, jobs.other, "b", queue="alpha")
    enqueue(app, jobs.task, "c", queue="alpha")
    with engine.connect() as connection:
        assert search.queue_names(connection) == ["alpha", "zeta"]
        assert search.job_names(connection) == ["dashboard_test.other", "dashboard_test.task"]
        assert search.queue_names(connection, limit=1) == ["alpha"]
    markup = client.get(PREFIX + "/jobs?state=ready").text
    assert _options(markup, "solidq-queue-names") == ["alpha", "zeta"]
    assert _options(markup, "solidq-job-names") == ["dashboard_test.other", "dashboard_test.task"]


def _options(markup: str, datalist: str) -> list[str]:
    match = re.search(f'<datalist id="{datalist}">(.*?)</datalist>', markup)
    assert match is not None
    return re.findall(r'<option value="([^"]*)">', match.group(1))


@pytest.mark.parametrize(
    "query",
    ["x" * (search.MAX_QUERY + 1), str(2**63), "9" * 30],
    ids=["too long", "past bigint", "thirty digits"],
)
def test_a_search_the_database_cannot_take_answers_400(client, query):
    response = client.get(PREFIX + "/jobs", query_string={"state": "failed", "q": query})
    assert response.status_code == 400


def test_a_blank_search_is_the_plain_list(app, engine, client):
    ready = enqueue(app, jobs.task, "waiting")
    assert get(client, "/jobs?state=ready&q=%20%20").job_ids() == [ready]


# Selected rows.


def test_the_lists_with_actions_have_boxes_and_the_others_none(app, engine, client):
    failed = failed_job(app, engine, "broken")
    enqueue(app, jobs.task, "later", wait=3600)
    failed_page = client.get(PREFIX + "/jobs?state=failed").text
    assert f'name="job_id" value="{failed}"' in failed_page
    assert "Retry selected" in failed_page and "Discard selected" in failed_page
    scheduled_page = client.get(PREFIX + "/jobs?state=scheduled").text
    assert "Discard selected" in scheduled_page and "Retry selected" not in scheduled_page
    finished_page = client.get(PREFIX + "/jobs?state=finished").text
    assert 'type="checkbox"' not in finished_page


def test_retry_of_selected_jobs_retries_those_still_failed_and_says_how_many(app, engine, client):
    first, second, third = (failed_job(app, engine, f"broken-{index}") for index in range(3))
    kept = failed_job(app, engine, "kept")
    assert actions.retry(engine, [second]) == 1  # someone else retried it meanwhile
    response = post_selected(client, "retry", [first, second, third], state="failed", queue="q")
    assert done_message(response) == "Retried 2 jobs; 1 was no longer failed."
    assert response.headers["Location"] == f"{PREFIX}/jobs?state=failed&queue=q"
    assert [job_state(engine, job_id) for job_id in (first, third, kept)] == [
        "ready",
        "ready",
        "failed",
    ]


def test_discard_of_selected_jobs_takes_them_only_from_the_lists_state(app, engine, client):
    later, other_later = (enqueue(app, jobs.task, f"later-{i}", wait=3600) for i in range(2))
    failed = failed_job(app, engine, "broken")
    response = post_selected(client, "discard", [later, failed], state="scheduled", q="later")
    assert done_message(response) == "Discarded 1 job; 1 was no longer scheduled."
    assert response.headers["Location"] == f"{PREFIX}/jobs?state=scheduled&q=later"
    assert job_state(engine, later) == "gone"
    assert job_state(engine, other_later) == "scheduled"
    assert job_state(engine, failed) == "failed"


def test_discard_of_selected_ready_and_deferred_jobs(app, engine, client):
    ready, kept = (enqueue(app, jobs.task, f"now-{index}") for index in range(2))
    later = enqueue(app, jobs.task, "later", wait=3600)
    response = post_selected(client, "discard", [ready, later], state="ready")
    assert done_message(response) == "Discarded 1 job; 1 was no longer ready."
    # A deferred job is a scheduled execution: the deferred list discards those too.
    response = post_selected(client, "discard", [later], state="deferred")
    assert done_message(response) == "Discarded 1 job."
    assert [job_state(engine, job) for job in (ready, kept, later)] == ["gone", "ready", "gone"]


def test_nothing_selected_does_nothing_and_says_so(app, engine, client):
    failed = failed_job(app, engine, "broken")
    response = post_selected(client, "discard", [], state="failed")
    assert done_message(response) == "No job selected: nothing done."
    assert job_state(engine, failed) == "failed"


def post_selected(client: FlaskClient, action: str, ids: list[int], **form: str) -> TestResponse:
    """POST the selected rows' form: the boxes' ids, the list's state and filters."""
    data: dict[str, t.Any] = {csrf.FIELD: csrf_token(client), "job_id": [str(i) for i in ids]}
    return client.post(f"{PREFIX}/selected/{action}", data={**data, **form})


@pytest.mark.parametrize(
    ("action", "form"),
    [
        ("retry", {"state": "scheduled", "job_id": "1"}),  # a scheduled job can't be retried
        ("discard", {"state": "claimed", "job_id": "1"}),  # nor a running one discarded
        ("discard", {"state": "nonsense", "job_id": "1"}),
        ("discard", {"job_id": "1"}),
        ("discard", {"state": "failed", "job_id": "one"}),
        ("discard", {"state": "failed", "job_id": str(2**63)}),
        ("discard", {"state": "failed", "job_id": "-1"}),
        ("discard", {"state": "failed", "job_id": "1", "before": "x"}),
        ("discard", {"state": "failed", "job_id": [str(i) for i in range(501)]}),
    ],
)
def test_a_selected_action_with_bad_input_answers_400_and_changes_nothing(
    app, engine, client, action, form
):
    failed = failed_job(app, engine, "broken")
    response = client.post(
        f"{PREFIX}/selected/{action}", data={csrf.FIELD: csrf_token(client), **form}
    )
    assert response.status_code == 400
    assert job_state(engine, failed) == "failed"


def test_a_selected_action_without_the_token_answers_400_and_changes_nothing(app, engine, client):
    failed = failed_job(app, engine, "broken")
    form = {"state": "failed", "job_id": str(failed)}
    csrf_token(client)  # the cookie is set; the form lacks its field
    assert client.post(f"{PREFIX}/selected/discard", data=form).status_code == 400
    other = app.test_client()
    assert other.post(f"{PREFIX}/selected/retry", data=form).status_code == 400
    assert job_state(engine, failed) == "failed"
    response = post(client, "/selected/discard", **form)
    assert done_message(response) == "Discarded 1 job."
    assert job_state(engine, failed) == "gone"
