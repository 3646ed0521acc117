"""The dashboard through Flask's test client, on every backend: closed by default (403 with no
configuration outside debug/testing; HTTP Basic; an ``@solidq.dashboard_auth`` rule; no
blueprint when turned off), CSRF on every action (400 and nothing changed without the
cookie's token), arguments / keys / errors escaped, the pages (overview, jobs by state with
filters and keyset pages, one job), the actions doing what the operations do, and a custom
URL prefix.

Jobs fail for real: they are claimed, performed and finished in this process (the helpers of
tests/controls/concurrency/test_concurrency_controls.py), raising what
:data:`dashboard_jobs.FAILURES` says. Pages are read with :class:`Page` (the standard library's HTML
parser), so assertions are on what a browser would show (cells, links, text), not on bytes of
markup.
"""

from __future__ import annotations

import datetime as dt
import html.parser
import os
import typing as t

import pytest
import sqlalchemy as sa
from werkzeug.http import parse_cookie

from flask_solidq import models
from flask_solidq.dashboard import csrf
from flask_solidq.dashboard import flash
from flask_solidq.operations import processes
from flask_solidq.operations import queues
from flask_solidq.reads import queue_figures
from tests import support
from tests.jobs import dashboard as jobs
from tests.operations.test_job_actions import enqueue
from tests.operations.test_job_actions import run_ready
from tests.support import solidq
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient
    from werkzeug.test import TestResponse

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)

PREFIX = "/solidq"
SCRIPT = "<script>alert(1)</script>"
IMAGE = "\"'><img src=x onerror=alert(1)>"
HOSTILE = f"{SCRIPT}{IMAGE}"


@pytest.fixture(autouse=True)
def clean_job_module() -> t.Iterator[None]:
    jobs.FAILURES.clear()
    yield
    jobs.FAILURES.clear()


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    """Overrides conftest's ``app``: the dashboard on (testing mode opens it)."""
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


@pytest.fixture(autouse=True)
def _push_request_context() -> None:
    """Overrides pytest-flask's fixture of that name, which keeps one request context (and so
    one app context and one ``g``) pushed around the whole test: every test-client request
    would then share it, unlike requests to a served app. See
    :func:`test_two_clients_inside_one_pushed_app_context_get_different_csrf_tokens`."""


@pytest.fixture
def make_app(app: Flask, database_url: str) -> t.Iterator[t.Callable[..., Flask]]:
    """Build more apps on the same database with other settings (``app`` empties it after)."""
    made: list[Flask] = []

    def make(**config: t.Any) -> Flask:
        other = support.create_app(database_url, **{"SOLIDQ_DASHBOARD": True, **config})
        made.append(other)
        return other

    yield make
    for other in made:
        with other.app_context():
            other.extensions["solidq"].dispose()
            support.db.engines[None].dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


# Reading pages.


class Page(html.parser.HTMLParser):
    """What a browser shows of a page: its text, the table rows (cell texts), the links
    (text -> href) and the forms (action -> hidden fields)."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.markup = markup
        self.texts: list[str] = []
        self.rows: list[list[str]] = []
        self.links: list[tuple[str, str]] = []
        self.forms: dict[str, dict[str, str]] = {}
        self._cell: list[str] | None = None
        self._link: tuple[str, list[str]] | None = None
        self._form: str | None = None
        self.feed(markup)
        self.close()

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.texts).split())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "a":
            self._link = (attributes.get("href", ""), [])
        elif tag == "form":
            self._form = attributes.get("action", "")
            self.forms.setdefault(self._form, {})
        elif tag == "input" and self._form is not None and attributes.get("type") == "hidden":
            self.forms[self._form][attributes.get("name", "")] = attributes.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "a" and self._link is not None:
            href, text = self._link
            self.links.append((" ".join("".join(text).split()), href))
            self._link = None
        elif tag == "form":
            self._form = None

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._link is not None:
            self._link[1].append(data)

    def row(self, first_cell: str) -> list[str]:
        """The table row whose first cell is ``first_cell``."""
        found = [row for row in self.rows if row and row[0] == first_cell]
        assert len(found) == 1, (first_cell, self.rows)
        return found[0]

    def link(self, text: str) -> str | None:
        found = [href for label, href in self.links if label == text]
        return found[0] if found else None

    def job_ids(self) -> list[int]:
        """The ids of the jobs table, in page order."""
        return [int(row[0]) for row in self.rows if row and row[0].isdigit()]


def page(response: TestResponse) -> Page:
    assert response.status_code == 200, (response.status_code, response.text[:500])
    return Page(response.text)


def get(client: FlaskClient, path: str, prefix: str = PREFIX) -> Page:
    return page(client.get(prefix + path))


# Making jobs in each state.


def failed_job(
    app: Flask, engine: sa.Engine, note: str, definition: t.Any = jobs.task, **options: t.Any
) -> int:
    """A job of ``definition`` that ran and failed with ValueError; its provider_job_id."""
    jobs.FAILURES[note] = ValueError
    job_id = enqueue(app, definition, note, **options)
    run_ready(app, engine)
    assert job_state(engine, job_id) == "failed"
    return job_id


def scheduled_at(engine: sa.Engine, job_id: int) -> dt.datetime:
    (row,) = support.rows(engine, SCHEDULED, SCHEDULED.c.job_id == job_id)
    return t.cast(dt.datetime, row.scheduled_at)


def paused(engine: sa.Engine) -> set[str]:
    with engine.connect() as connection:
        return queue_figures.paused_queues(connection)


# CSRF.


def csrf_token(client: FlaskClient, prefix: str = PREFIX) -> str:
    """The token of the dashboard's cookie, after loading a page to get one."""
    if client.get_cookie(csrf.COOKIE, path=prefix) is None:
        page(client.get(prefix + "/"))
    cookie = client.get_cookie(csrf.COOKIE, path=prefix)
    assert cookie is not None
    return cookie.value


def post(client: FlaskClient, path: str, prefix: str = PREFIX, **form: str) -> TestResponse:
    """POST an action the way the dashboard's form does (the token in its field)."""
    token = csrf_token(client, prefix)
    return client.post(prefix + path, data={csrf.FIELD: token, **form})


def done_message(response: TestResponse) -> str:
    """The message an action's 303 redirect carries: in its flash cookie (signed, read here
    without checking the signature; the tests of flash messages check it), never its URL."""
    assert response.status_code == 303, (response.status_code, response.text[:500])
    assert "done=" not in response.headers["Location"]
    cookies = [
        parse_cookie(header.split(";")[0]) for header in response.headers.getlist("Set-Cookie")
    ]
    (signed,) = [cookie[flash.COOKIE] for cookie in cookies if flash.COOKIE in cookie]
    # itsdangerous's TimestampSigner: message, timestamp, signature, joined by dots.
    return signed.rsplit(".", 2)[0]


# 1. Safe by default.


class World(t.NamedTuple):
    """One job of each kind the actions touch, to see that refused requests change nothing."""

    failed: int
    scheduled: int


def world(app: Flask, engine: sa.Engine) -> World:
    failed = failed_job(app, engine, "kept", queue="alpha")
    scheduled = enqueue(app, jobs.task, "later", queue="alpha", wait=3600)
    return World(failed, scheduled)


def pages(ids: World) -> list[str]:
    return [
        "/",
        "/jobs",
        "/jobs?state=scheduled",
        "/jobs?state=ready&queue=alpha",
        f"/jobs/{ids.failed}",
    ]


def actions(ids: World) -> list[tuple[str, dict[str, str]]]:
    """Every action URL, with its form fields."""
    return [
        (f"/jobs/{ids.failed}/retry", {}),
        (f"/jobs/{ids.failed}/discard", {"state": "failed"}),
        (f"/jobs/{ids.scheduled}/run_now", {}),
        (f"/jobs/{ids.scheduled}/discard", {"state": "scheduled"}),
        ("/failed/retry", {"queue": "alpha"}),
        ("/failed/retry", {}),
        ("/failed/discard", {}),
        ("/queues/alpha/pause", {}),
        # No batch holds the jobs: the refusals come before the view looks.
        ("/batches/1/retry", {}),
        ("/batches/1/discard", {}),
    ]


def assert_unchanged(engine: sa.Engine, ids: World) -> None:
    assert job_state(engine, ids.failed) == "failed"
    assert job_state(engine, ids.scheduled) == "scheduled"
    assert paused(engine) == set()


def test_with_no_configuration_outside_debug_and_testing_every_url_answers_403(app, engine):
    ids = world(app, engine)
    app.testing = False
    client = app.test_client()
    # A matching cookie and header: the refusal is the access check's, not the CSRF check's.
    client.set_cookie(csrf.COOKIE, "token", path=PREFIX)
    for path in pages(ids):
        response = client.get(PREFIX + path)
        assert response.status_code == 403, path
        assert "SOLIDQ_DASHBOARD_BASIC_AUTH" in response.text
        assert "kept" not in response.text
    for path, form in actions(ids):
        response = client.post(PREFIX + path, data=form, headers={csrf.HEADER: "token"})
        assert response.status_code == 403, path
    assert_unchanged(engine, ids)


@pytest.mark.parametrize("mode", ["debug", "testing"])
def test_debug_or_testing_mode_opens_every_page(app, engine, mode):
    ids = world(app, engine)
    app.testing = mode == "testing"
    app.debug = mode == "debug"
    client = app.test_client()
    for path in pages(ids):
        assert client.get(PREFIX + path).status_code == 200, path


def test_basic_auth_asks_for_credentials_and_takes_only_the_right_ones(app, make_app, engine):
    ids = world(app, engine)
    for testing in (True, False):
        protected = make_app(SOLIDQ_DASHBOARD_BASIC_AUTH=("admin", "s3cret"), TESTING=testing)
        client = protected.test_client()
        for path in pages(ids):
            response = client.get(PREFIX + path)
            assert response.status_code == 401, path
            assert response.headers["WWW-Authenticate"].startswith("Basic ")
            for wrong in (("admin", "wrong"), ("root", "s3cret"), ("", ""), ("admin", "")):
                assert client.get(PREFIX + path, auth=wrong).status_code == 401, (path, wrong)
            assert client.get(PREFIX + path, auth=("admin", "s3cret")).status_code == 200, path
        for path, form in actions(ids):
            response = client.post(PREFIX + path, data=form, auth=("admin", "wrong"))
            assert response.status_code == 401, path
        assert_unchanged(engine, ids)


@pytest.fixture
def rule() -> t.Iterator[dict[str, bool]]:
    """An ``@solidq.dashboard_auth`` rule answering ``rule["allow"]``; removed afterwards."""
    answer = {"allow": False}

    def check() -> bool:
        return answer["allow"]

    solidq.dashboard_auth(check)
    try:
        yield answer
    finally:
        solidq._dashboard_rules.remove(check)


def test_a_dashboard_auth_rule_that_refuses_closes_it_even_in_testing_mode(app, engine, rule):
    ids = world(app, engine)
    client = app.test_client()
    client.set_cookie(csrf.COOKIE, "token", path=PREFIX)
    for path in pages(ids):
        assert client.get(PREFIX + path).status_code == 403, path
    for path, form in actions(ids):
        response = client.post(PREFIX + path, data=form, headers={csrf.HEADER: "token"})
        assert response.status_code == 403, path
    assert_unchanged(engine, ids)


def test_a_dashboard_auth_rule_that_allows_opens_it_even_with_basic_auth_set(
    make_app, engine, rule
):
    rule["allow"] = True
    protected = make_app(SOLIDQ_DASHBOARD_BASIC_AUTH=("admin", "s3cret"), TESTING=False)
    ids = world(protected, engine)
    client = protected.test_client()
    for path in pages(ids):
        assert client.get(PREFIX + path).status_code == 200, path


def test_with_the_dashboard_turned_off_there_is_no_blueprint(make_app):
    off = make_app(SOLIDQ_DASHBOARD=False)
    assert "solidq_dashboard" not in off.blueprints
    client = off.test_client()
    assert client.get(PREFIX + "/").status_code == 404
    assert client.get(PREFIX + "/jobs").status_code == 404
    assert client.post(PREFIX + "/queues/alpha/pause").status_code == 404


# 2. CSRF.


def test_the_csrf_cookie_is_http_only_strict_and_scoped_to_the_dashboard(client):
    response = client.get(PREFIX + "/")
    (cookie,) = [
        header for header in response.headers.getlist("Set-Cookie") if header.startswith("solidq")
    ]
    attributes = {part.strip().split("=")[0].lower(): part.strip() for part in cookie.split(";")}
    assert "httponly" in attributes
    assert attributes["samesite"] == "SameSite=Strict"
    assert attributes["path"] == f"Path={PREFIX}"
    # Every form of the page carries the cookie's token.
    token = csrf_token(client)
    forms = Page(client.get(PREFIX + "/").text).forms
    # Every form but the queue search, a GET to the page itself.
    actions = {action: fields for action, fields in forms.items() if action != PREFIX + "/"}
    assert all(fields.get(csrf.FIELD) == token for fields in actions.values())


def test_every_action_without_the_right_token_answers_400_and_changes_nothing(app, engine):
    ids = world(app, engine)
    without_cookie = app.test_client()
    with_cookie = app.test_client()
    token = csrf_token(with_cookie)
    for path, form in actions(ids):
        refusals = [
            without_cookie.post(PREFIX + path, data=form),
            without_cookie.post(PREFIX + path, data={**form, csrf.FIELD: token}),
            with_cookie.post(PREFIX + path, data=form),
            with_cookie.post(PREFIX + path, data={**form, csrf.FIELD: "wrong"}),
            with_cookie.post(PREFIX + path, data=form, headers={csrf.HEADER: "wrong"}),
            with_cookie.post(PREFIX + path, data={**form, csrf.FIELD: ""}),
        ]
        assert [response.status_code for response in refusals] == [400] * len(refusals), path
    assert_unchanged(engine, ids)


def test_an_action_with_the_cookies_token_in_the_form_field_works(app, engine, client):
    ids = world(app, engine)
    token = csrf_token(client)
    response = client.post(f"{PREFIX}/jobs/{ids.failed}/retry", data={csrf.FIELD: token})
    assert response.status_code == 303
    assert job_state(engine, ids.failed) == "ready"


def test_an_action_with_the_cookies_token_in_the_header_works(app, engine, client):
    world(app, engine)
    token = csrf_token(client)
    response = client.post(f"{PREFIX}/queues/alpha/pause", headers={csrf.HEADER: token})
    assert response.status_code == 303
    assert paused(engine) == {"alpha"}


def test_two_clients_inside_one_pushed_app_context_get_different_csrf_tokens(app):
    with app.test_request_context():
        first, second = app.test_client(), app.test_client()
        assert csrf_token(first) != csrf_token(second)


# 3. Escaping.


def test_arguments_keys_and_errors_are_escaped_on_the_jobs_list_and_the_job_page(
    app, engine, client
):
    job_id = enqueue(app, jobs.hostile, HOSTILE)
    run_ready(app, engine)
    assert job_state(engine, job_id) == "failed"
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    assert HOSTILE in row.concurrency_key
    listing = client.get(f"{PREFIX}/jobs?state=failed")
    detail = client.get(f"{PREFIX}/jobs/{job_id}")
    for response in (listing, detail):
        assert response.status_code == 200
        assert SCRIPT not in response.text
        assert "<img" not in response.text
    # Shown as text: what a browser displays is the markup itself, harmless.
    assert HOSTILE in Page(listing.text).row(str(job_id))[4]
    shown = Page(detail.text).text
    assert f"builtins.ValueError : {HOSTILE}" in shown  # the error
    assert row.concurrency_key in shown  # the key
    assert "&lt;script&gt;" in detail.text


# 4. Pages.


def test_the_overview_lists_each_queue_with_its_counts_and_the_processes(app, engine, client):
    failed_job(app, engine, "broken", queue="alpha")
    jobs.FAILURES.clear()
    enqueue(app, jobs.task, "done", queue="beta")
    run_ready(app, engine)
    for note in ("one", "two"):
        enqueue(app, jobs.task, note, queue="alpha")
    enqueue(app, jobs.task, "later", queue="beta", wait=3600)
    queues.pause(engine, "beta")
    process_id = processes.register(
        engine,
        kind="Worker",
        name="worker-dashboard",
        pid=os.getpid(),
        supervisor_id=None,
        metadata={},
    )
    overview = get(client, "/")
    # Queue, ready, scheduled, deferred, in progress, blocked, failed, finished, latency,
    # paused, action.
    assert overview.row("alpha")[1:8] == ["2", "0", "0", "0", "0", "1", "0"]
    assert overview.row("alpha")[9:] == ["", "Pause"]
    assert overview.row("beta")[1:8] == ["0", "1", "0", "0", "0", "0", "1"]
    assert overview.row("beta")[9:] == ["paused", "Resume"]
    worker = overview.row("Worker")
    assert worker[1:4] == [
        "worker-dashboard",
        support_hostname(engine, process_id),
        str(os.getpid()),
    ]
    assert worker[4].endswith("s ago")


def support_hostname(engine: sa.Engine, process_id: int) -> str:
    table = t.cast(sa.Table, models.ProcessRecord.__table__)
    (row,) = support.rows(engine, table, table.c.id == process_id)
    return t.cast(str, row.hostname)


def test_the_overview_says_so_when_there_is_nothing(client):
    overview = get(client, "/")
    assert "No jobs yet." in overview.text
    assert "No process is running" in overview.text


def test_the_failed_jobs_page_shows_each_error_class_and_message(app, engine, client):
    first = failed_job(app, engine, "first")
    second = failed_job(app, engine, "second", definition=jobs.other, queue="beta")
    listing = get(client, "/jobs?state=failed")
    assert listing.job_ids() == [second, first]
    assert listing.row(str(second))[1:4] == ["dashboard_test.other", "beta", "0"]
    assert listing.row(str(second))[4] == (
        "builtins.ValueError: dashboard_test.other failed on purpose for second"
    )
    assert listing.row(str(first))[4] == (
        "builtins.ValueError: dashboard_test.task failed on purpose for first"
    )
    # Failed is the default state.
    assert get(client, "/jobs").job_ids() == [second, first]


def test_the_scheduled_jobs_page_shows_each_due_time(app, engine, client):
    job_id = enqueue(app, jobs.task, "later", wait=3600)
    due = scheduled_at(engine, job_id).strftime("%Y-%m-%d %H:%M:%S")
    listing = get(client, "/jobs?state=scheduled")
    assert listing.job_ids() == [job_id]
    assert listing.row(str(job_id))[4] == f"{due} UTC"
    assert get(client, "/jobs?state=failed").job_ids() == []
    assert "No failed jobs." in get(client, "/jobs?state=failed").text


def test_the_jobs_page_filters_by_queue_and_job_name(app, engine, client):
    task_alpha = enqueue(app, jobs.task, "a", queue="alpha")
    task_beta = enqueue(app, jobs.task, "b", queue="beta")
    other_alpha = enqueue(app, jobs.other, "c", queue="alpha")
    assert get(client, "/jobs?state=ready").job_ids() == [other_alpha, task_beta, task_alpha]
    assert get(client, "/jobs?state=ready&queue=alpha").job_ids() == [other_alpha, task_alpha]
    assert get(client, "/jobs?state=ready&job=dashboard_test.task").job_ids() == [
        task_beta,
        task_alpha,
    ]
    filtered = get(client, "/jobs?state=ready&queue=alpha&job=dashboard_test.task")
    assert filtered.job_ids() == [task_alpha]
    assert get(client, "/jobs?state=ready&queue=gamma").job_ids() == []
    assert "No ready jobs matching." in get(client, "/jobs?state=ready&queue=gamma").text


def test_next_page_gives_the_following_jobs_without_overlap(app, engine, client):
    with app.app_context():
        enqueued = [jobs.task.new(f"job-{index}") for index in range(123)]
        solidq.perform_all_later(enqueued)
    ids = sorted((t.cast(int, job.provider_job_id) for job in enqueued), reverse=True)
    seen: list[int] = []
    path: str | None = f"{PREFIX}/jobs?state=ready"
    while path is not None:
        listing = page(client.get(path))
        assert 0 < len(listing.job_ids()) <= 50
        seen.extend(listing.job_ids())
        path = listing.link("Next page")
    assert seen == ids
    # The filters stay on the next page's link.
    for index in range(60):
        enqueue(app, jobs.other, f"other-{index}", queue="beta")
    first = get(client, "/jobs?state=ready&queue=beta")
    next_link = first.link("Next page")
    assert next_link is not None
    second = page(client.get(next_link))
    assert second.job_ids() and not set(second.job_ids()) & set(first.job_ids())
    assert {job for job in second.job_ids()} <= set(range(max(ids) + 1, max(ids) + 61))


def test_the_job_page_of_a_failed_job_shows_its_fields_payload_error_and_backtrace(
    app, engine, client
):
    job_id = failed_job(app, engine, "broken", queue="alpha", priority=3)
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    shown = get(client, f"/jobs/{job_id}")
    text = shown.text
    assert f"Job {job_id} dashboard_test.task" in text
    assert "State failed" in text
    assert f"job_id {row.active_job_id}" in text
    assert "Queue alpha (priority 3)" in text
    assert "Concurrency key - Rate-limit key - Coalesce key - Collected calls 0" in text
    assert "Error builtins.ValueError : dashboard_test.task failed on purpose for broken" in text
    # The backtrace names the job's code; the payload holds the argument.
    assert "jobs/dashboard.py" in text
    assert '"broken"' in shown.markup or "&#34;broken&#34;" in shown.markup
    assert set(shown.forms) == {
        f"{PREFIX}/jobs/{job_id}/retry",
        f"{PREFIX}/jobs/{job_id}/discard",
    }
    # Found by its job id (UUID) too.
    assert f"Job {job_id}" in get(client, f"/jobs/{row.active_job_id}").text


def test_the_job_page_counts_the_run_of_a_job_that_failed_on_its_first_run(app, engine, client):
    job_id = failed_job(app, engine, "broken")
    assert "Executions 1" in get(client, f"/jobs/{job_id}").text


def test_an_unknown_job_or_state_answers_404(app, engine, client):
    job_id = failed_job(app, engine, "broken")
    assert client.get(f"{PREFIX}/jobs/{job_id + 1000}").status_code == 404
    assert client.get(f"{PREFIX}/jobs/no-such-job").status_code == 404
    assert client.get(f"{PREFIX}/jobs?state=lost").status_code == 404


# 5. Actions.


def test_retry_makes_a_failed_job_ready_and_says_so_on_the_next_page(app, engine, client):
    job_id = failed_job(app, engine, "broken")
    other = failed_job(app, engine, "also-broken")
    response = post(client, f"/jobs/{job_id}/retry")
    assert done_message(response) == "Retried 1 job."
    assert job_state(engine, job_id) == "ready"
    assert job_state(engine, other) == "failed"
    following = page(client.get(response.headers["Location"]))
    assert "Retried 1 job." in following.text
    assert "State ready" in following.text


def test_a_flash_is_said_once_and_never_rides_in_the_url(app, engine, client):
    job_id = failed_job(app, engine, "broken")
    response = post(client, f"/jobs/{job_id}/retry")
    location = response.headers["Location"]
    assert location == f"{PREFIX}/jobs/{job_id}"

    shown = client.get(location)
    reloaded = client.get(location)

    assert "Retried 1 job." in page(shown).text
    assert "Retried 1 job." not in page(reloaded).text
    assert 'class="done"' not in reloaded.text
    # The message is the server's word: a query parameter or a cookie it didn't sign says
    # nothing.
    assert "Hacked" not in client.get(f"{PREFIX}/?done=Hacked").text
    client.set_cookie(flash.COOKIE, "Hacked.AAAA.BBBB", path=PREFIX)
    assert "Hacked" not in client.get(f"{PREFIX}/").text


def test_a_flash_older_than_its_max_age_is_not_shown(app, engine, client, monkeypatch):
    job_id = failed_job(app, engine, "broken")
    location = post(client, f"/jobs/{job_id}/retry").headers["Location"]
    monkeypatch.setattr(flash, "MAX_AGE", -1)

    assert "Retried 1 job." not in page(client.get(location)).text


def test_discard_deletes_a_failed_job_and_goes_back_to_the_failed_list(app, engine, client):
    job_id = failed_job(app, engine, "broken")
    other = failed_job(app, engine, "also-broken")
    response = post(client, f"/jobs/{job_id}/discard", state="failed")
    assert done_message(response) == "Discarded 1 job."
    assert job_state(engine, job_id) == "gone"
    assert job_state(engine, other) == "failed"
    following = page(client.get(response.headers["Location"]))
    assert "Discarded 1 job." in following.text
    assert following.job_ids() == [other]


def test_run_now_makes_a_scheduled_job_ready(app, engine, client):
    job_id = enqueue(app, jobs.task, "later", wait=3600)
    other = enqueue(app, jobs.task, "later-too", wait=3600)
    response = post(client, f"/jobs/{job_id}/run_now")
    assert done_message(response) == "Made due now: 1 job."
    assert job_state(engine, job_id) == "ready"
    assert job_state(engine, other) == "scheduled"
    assert "Made due now: 1 job." in page(client.get(response.headers["Location"])).text


def test_an_action_on_a_job_not_in_its_state_does_nothing_and_says_so(app, engine, client):
    job_id = enqueue(app, jobs.task, "waiting")
    response = post(client, f"/jobs/{job_id}/retry")
    assert done_message(response) == "Retried 0 jobs."
    assert job_state(engine, job_id) == "ready"


def _failed_in_two_queues(app: Flask, engine: sa.Engine) -> tuple[list[int], list[int]]:
    alpha = [failed_job(app, engine, f"alpha-{index}", queue="alpha") for index in range(3)]
    beta = [failed_job(app, engine, f"beta-{index}", queue="beta") for index in range(2)]
    return alpha, beta


def test_retry_all_with_a_queue_filter_retries_only_that_queues_failed_jobs(app, engine, client):
    alpha, beta = _failed_in_two_queues(app, engine)
    response = post(client, "/failed/retry", queue="alpha", job="")
    assert done_message(response) == "Retried 3 failed jobs."
    assert [job_state(engine, job_id) for job_id in alpha] == ["ready"] * 3
    assert [job_state(engine, job_id) for job_id in beta] == ["failed"] * 2
    following = page(client.get(response.headers["Location"]))
    assert "Retried 3 failed jobs." in following.text
    assert following.job_ids() == beta[::-1]


def test_discard_all_with_a_queue_filter_discards_only_that_queues_failed_jobs(app, engine, client):
    alpha, beta = _failed_in_two_queues(app, engine)
    response = post(client, "/failed/discard", queue="beta", job="")
    assert done_message(response) == "Discarded 2 failed jobs."
    assert [job_state(engine, job_id) for job_id in alpha] == ["failed"] * 3
    assert [job_state(engine, job_id) for job_id in beta] == ["gone"] * 2
    assert "Discarded 2 failed jobs." in page(client.get(response.headers["Location"])).text


def test_the_failed_list_forms_carry_its_filter_to_retry_all(app, engine, client):
    alpha, beta = _failed_in_two_queues(app, engine)
    listing = get(client, "/jobs?state=failed&queue=beta")
    fields = listing.forms[f"{PREFIX}/failed/retry"]
    assert fields["queue"] == "beta"
    response = client.post(f"{PREFIX}/failed/retry", data=fields)
    assert done_message(response) == "Retried 2 failed jobs."
    assert [job_state(engine, job_id) for job_id in alpha] == ["failed"] * 3


def test_pause_and_resume_a_queue(app, engine, client):
    enqueue(app, jobs.task, "waiting", queue="alpha")
    response = post(client, "/queues/alpha/pause")
    assert done_message(response) == "Queue alpha paused."
    assert paused(engine) == {"alpha"}
    overview = page(client.get(response.headers["Location"]))
    assert "Queue alpha paused." in overview.text
    assert overview.row("alpha")[9:] == ["paused", "Resume"]
    response = post(client, "/queues/alpha/resume")
    assert done_message(response) == "Queue alpha resumed."
    assert paused(engine) == set()
    overview = page(client.get(response.headers["Location"]))
    assert "Queue alpha resumed." in overview.text
    assert overview.row("alpha")[9:] == ["", "Pause"]


# 6. Another prefix.


def test_every_page_links_the_dashboards_favicon_which_it_serves(client):
    overview = client.get(f"{PREFIX}/").text
    link = f'<link rel="icon" type="image/svg+xml" href="{PREFIX}/static/favicon.svg">'
    assert link in overview
    with client.get(f"{PREFIX}/static/favicon.svg") as response:
        assert response.status_code == 200
        assert response.mimetype == "image/svg+xml"
        assert response.text.startswith("<svg ")


def test_a_custom_url_prefix_serves_the_dashboard_there(make_app, engine):
    prefix = "/admin/queue"
    moved = make_app(SOLIDQ_DASHBOARD_URL_PREFIX=prefix)
    job_id = failed_job(moved, engine, "broken", queue="alpha")
    client = moved.test_client()
    assert client.get(PREFIX + "/").status_code == 404
    overview = get(client, "/", prefix=prefix)
    assert overview.link("Failed") == f"{prefix}/jobs?state=failed"
    assert get(client, "/jobs?state=failed", prefix=prefix).job_ids() == [job_id]
    cookie = client.get_cookie(csrf.COOKIE, path=prefix)
    assert cookie is not None
    response = post(client, f"/jobs/{job_id}/retry", prefix=prefix)
    assert response.headers["Location"] == f"{prefix}/jobs/{job_id}"
    assert f"Path={prefix}" in response.headers["Set-Cookie"]
    assert job_state(engine, job_id) == "ready"
    with client.get(f"{prefix}/static/htmx-2.0.11.min.js") as response:
        assert response.status_code == 200
