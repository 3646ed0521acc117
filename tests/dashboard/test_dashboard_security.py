"""The dashboard's hardening, on every backend (issue 18, item 9):

1. CSRF: only a token the server signed passes (a made-up cookie/field pair planted from a
   sibling subdomain is refused), signed with ``SOLIDQ_DASHBOARD_SECRET_KEY``, else
   ``SECRET_KEY`` (and its fallbacks), else a key of the process (one warning); a request whose
   ``Origin`` names another host, or whose ``Sec-Fetch-Site`` is another site's, is refused.
2. Every response carries Content-Security-Policy, X-Frame-Options, Referrer-Policy and
   X-Content-Type-Options; the pages still work under that policy in Chromium (no violation,
   the stylesheet applied, htmx refreshing, Discard asking first).
3. A parameter the database would refuse (a NUL, an id past ``bigint``, a negative or
   non-numeric id or cursor, a queue name past its column) answers 400 with a message, and
   changes nothing.
4. A queue path with ``//`` acts on the queue it names, with no redirect to another.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import typing as t
from urllib.parse import quote
from urllib.parse import urlsplit

import itsdangerous
import pytest
import sqlalchemy as sa

from flask_solidq.dashboard import csrf
from flask_solidq.dashboard import headers
from flask_solidq.dashboard import params
from tests.dashboard import test_dashboard as dashboard_tests
from tests.dashboard import test_dashboard_browser as browser_tests
from tests.dashboard.test_dashboard import Page
from tests.dashboard.test_dashboard import csrf_token
from tests.dashboard.test_dashboard import done_message
from tests.dashboard.test_dashboard import failed_job
from tests.dashboard.test_dashboard import paused
from tests.jobs import dashboard as jobs
from tests.operations.test_job_actions import enqueue
from tests.support import solidq
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask.testing import FlaskClient
    from playwright.sync_api import Page as BrowserPage
    from werkzeug.test import TestResponse

# The browser test's fixtures: Chromium, the app it serves over HTTP, a page of a fresh context.
browser = browser_tests.browser
dashboard_app = browser_tests.dashboard_app
base_url = browser_tests.base_url
page = browser_tests.page

PREFIX = "/solidq"
TOO_BIG = str(2**63)
LARGEST = str(2**63 - 1)


# The dashboard tests' fixtures: the dashboard on, a request context per request, the job
# module's failures cleared.
clean_job_module = dashboard_tests.clean_job_module
app = dashboard_tests.app
_push_request_context = dashboard_tests._push_request_context
client = dashboard_tests.client
make_app = dashboard_tests.make_app


def signed(key: str | bytes, value: str = "") -> str:
    """A token as the dashboard makes them, signed with ``key``."""
    signer = itsdangerous.Signer(key, salt=csrf.SALT, digest_method=hashlib.sha256)
    return signer.sign(value or secrets.token_urlsafe(32)).decode()


def post_pair(client: FlaskClient, path: str, token: str) -> TestResponse:
    """POST ``path`` with ``token`` as both the cookie and the form field."""
    client.set_cookie(csrf.COOKIE, token, path=PREFIX)
    return client.post(PREFIX + path, data={csrf.FIELD: token})


def post_from_page(client: FlaskClient, path: str, **sent: str) -> TestResponse:
    """POST ``path`` with the token a page of the dashboard gave ``client``, and the headers
    ``sent``."""
    token = csrf_token(client)
    return client.post(PREFIX + path, data={csrf.FIELD: token}, headers=sent)


# 1. CSRF: tokens the server signed.


def test_a_cookie_and_field_pair_the_server_never_signed_is_refused(app, engine, client):
    failed = failed_job(app, engine, "kept", queue="alpha")
    for made_up in ("x", "token", signed("another key")[:-1] + "A", "é", "a.b"):
        assert post_pair(client, "/queues/alpha/pause", made_up).status_code == 400, made_up
        response = post_pair(client, f"/jobs/{failed}/retry", made_up)
        assert response.status_code == 400, made_up
        assert "CSRF token" in response.text
    assert paused(engine) == set()
    assert job_state(engine, failed) == "failed"


def test_a_token_signed_with_another_key_is_refused(app, engine, client):
    failed_job(app, engine, "kept", queue="alpha")
    for key in ("another key", b"", csrf._key_of_this_process() + b"!"):
        response = post_pair(client, "/queues/alpha/pause", signed(key))
        assert response.status_code == 400, key
    assert paused(engine) == set()


def test_the_token_a_page_gives_is_signed_and_accepted(app, engine, client):
    failed_job(app, engine, "kept", queue="alpha")
    token = csrf_token(client)
    with app.app_context():
        keys = csrf.signing_keys()
    assert itsdangerous.Signer(keys, salt=csrf.SALT, digest_method=hashlib.sha256).validate(token)
    response = client.post(PREFIX + "/queues/alpha/pause", data={csrf.FIELD: token})
    assert done_message(response) == "Queue alpha paused."
    assert paused(engine) == {"alpha"}


def test_an_unsigned_cookie_is_replaced_by_a_signed_token_on_the_next_page(app, client):
    client.set_cookie(csrf.COOKIE, "planted", path=PREFIX)
    response = client.get(PREFIX + "/")
    assert response.status_code == 200
    cookie = client.get_cookie(csrf.COOKIE, path=PREFIX)
    assert cookie is not None and cookie.value != "planted"
    # Every form but the queue search, a GET to the page itself.
    forms = {action: f for action, f in Page(response.text).forms.items() if action != PREFIX + "/"}
    assert forms == {} or all(f[csrf.FIELD] == cookie.value for f in forms.values())


def test_tokens_are_signed_with_the_dashboards_key_else_secret_key_and_its_fallbacks(
    make_app, engine
):
    own = make_app(SECRET_KEY="app key", SOLIDQ_DASHBOARD_SECRET_KEY="dashboard key")
    plain = make_app(SECRET_KEY="new key", SECRET_KEY_FALLBACKS=["old key"])
    cases = [
        (own, "dashboard key", 303),
        (own, "app key", 400),
        (plain, "new key", 303),
        (plain, "old key", 303),  # signed before the key was rotated
        (plain, "other key", 400),
    ]
    for app, key, status in cases:
        client = app.test_client()
        response = post_pair(client, "/queues/alpha/pause", signed(key))
        assert response.status_code == status, (key, status)
        # A page's new token is signed with the newest key.
        page_token = csrf_token(app.test_client())
        newest = "dashboard key" if app is own else "new key"
        assert page_token == signed(newest, page_token.split(".")[0])
    assert paused(engine) == {"alpha"}


def test_without_any_key_one_warning_says_tokens_are_this_process_only(
    make_app, engine, monkeypatch, caplog
):
    monkeypatch.setattr(csrf, "_process_key", None)
    apps = [make_app(), make_app()]
    with caplog.at_level(logging.WARNING, logger=csrf.__name__):
        tokens = [csrf_token(app.test_client()) for app in apps for _ in range(2)]
    (warning,) = [record for record in caplog.records if record.name == csrf.__name__]
    assert "Set SECRET_KEY" in warning.getMessage()
    assert len(set(tokens)) == len(tokens)
    # One process, one key: a token of one app passes in the other.
    response = post_pair(apps[1].test_client(), "/queues/alpha/pause", tokens[0])
    assert response.status_code == 303
    assert paused(engine) == {"alpha"}


@pytest.mark.parametrize("value", ["", 42, ["key"]])
def test_a_dashboard_key_that_cant_sign_is_refused_when_the_app_starts(make_app, value):
    with pytest.raises(ValueError, match="SOLIDQ_DASHBOARD_SECRET_KEY must be a non-empty"):
        make_app(SOLIDQ_DASHBOARD_SECRET_KEY=value)


# 1. CSRF: where the request comes from.


@pytest.mark.parametrize(
    "sender",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "http://sub.localhost"},  # a sibling subdomain
        {"Origin": "http://localhost:8080"},  # another port of the same host
        {"Origin": "null"},  # a sandboxed frame or a file page
        {"Origin": "not a url"},
        {"Origin": "http://localhost:99999"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # a sibling subdomain
        {"Origin": "http://localhost", "Sec-Fetch-Site": "same-site"},
    ],
)
def test_an_action_another_origin_sent_is_refused_even_with_a_signed_token(
    app, engine, client, sender
):
    failed = failed_job(app, engine, "kept", queue="alpha")
    for path in ("/queues/alpha/pause", f"/jobs/{failed}/retry", "/failed/discard"):
        response = post_from_page(client, path, **sender)
        assert response.status_code == 400, (path, response.text)
        assert "request refused" in response.text
    assert paused(engine) == set()
    assert job_state(engine, failed) == "failed"


@pytest.mark.parametrize(
    "sender",
    [
        {"Origin": "http://localhost"},
        {"Origin": "https://localhost"},  # TLS ended by a proxy in front
        {"Origin": "http://LOCALHOST:80"},
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},  # the user's own doing
        {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"},
    ],
)
def test_an_action_the_dashboards_own_page_sent_passes(app, engine, client, sender):
    enqueue(app, jobs.task, "waiting", queue="alpha")
    response = post_from_page(client, "/queues/alpha/pause", **sender)
    assert done_message(response) == "Queue alpha paused."
    assert paused(engine) == {"alpha"}


def test_the_origin_is_compared_with_the_host_the_request_names(app, engine, client):
    # A loopback name: testing mode opens the dashboard only to those (access.py).
    host = {"base_url": "http://queue.localhost:8443"}
    token = csrf_token(client)
    client.set_cookie(csrf.COOKIE, token, domain="queue.localhost", path=PREFIX)
    refused = client.post(
        PREFIX + "/queues/alpha/pause",
        data={csrf.FIELD: token},
        headers={"Origin": "http://queue.localhost"},
        **host,
    )
    assert refused.status_code == 400
    taken = client.post(
        PREFIX + "/queues/alpha/pause",
        data={csrf.FIELD: token},
        headers={"Origin": "https://queue.localhost:8443"},
        **host,
    )
    assert done_message(taken) == "Queue alpha paused."
    assert paused(engine) == {"alpha"}


# 2. Headers.


def assert_security_headers(response: TestResponse) -> None:
    for name, value in headers.HEADERS.items():
        assert response.headers.get(name) == value, (name, response.status_code)


def test_every_dashboard_response_carries_the_security_headers(app, engine, make_app, client):
    failed = failed_job(app, engine, "kept", queue="alpha")
    responses = [
        client.get(PREFIX + path)
        for path in (
            "/",
            "/jobs?state=failed",
            f"/jobs/{failed}",
            "/budgets",
            "/coalescing",
            "/concurrency",
            "/processes",
            "/recurring",
            "/static/dashboard.js",
            "/static/dashboard.css",
            "/static/htmx-2.0.11.min.js",
            f"/jobs/{TOO_BIG}",  # 400
            "/jobs/999999999",  # 404
        )
    ]
    responses.append(client.post(PREFIX + "/queues/alpha/pause"))  # 400: no token
    responses.append(post_from_page(client, "/queues/alpha/pause"))  # 303
    closed = make_app(TESTING=False).test_client().get(PREFIX + "/")  # 403
    asking = make_app(SOLIDQ_DASHBOARD_BASIC_AUTH=("a", "b")).test_client().get(PREFIX + "/")
    for response in [*responses, closed, asking]:
        response.close()  # the static files' are open files
        assert_security_headers(response)
    statuses = sorted({response.status_code for response in [*responses, closed, asking]})
    assert statuses == [200, 303, 400, 401, 403, 404]


def test_the_pages_have_no_inline_script_style_or_handler(app, engine, client):
    failed = failed_job(app, engine, "kept", queue="alpha")
    enqueue(app, jobs.task, "later", queue="alpha", wait=3600)
    for path in ("/", "/jobs?state=failed", "/jobs?state=scheduled", f"/jobs/{failed}"):
        markup = client.get(PREFIX + path).text
        assert "<style" not in markup and " style=" not in markup, path
        assert " onsubmit=" not in markup and " onclick=" not in markup, path
        for script in markup.split("<script")[1:]:
            assert script.lstrip().startswith("src="), path


# 3. Bad input: 400 with a message, never 500.

NUL = "%00"

#: (method, path, form fields): each one a database driver would have refused.
BAD_INPUTS: list[tuple[str, str, dict[str, str]]] = [
    # The jobs list: state, filters, cursor.
    ("GET", f"/jobs?state=fail{NUL}ed", {}),
    ("GET", f"/jobs?state=failed&queue=al{NUL}pha", {}),
    ("GET", f"/jobs?state=ready&job=ta{NUL}sk", {}),
    ("GET", f"/jobs?state=failed&before=1{NUL}", {}),
    ("GET", f"/jobs?state=failed&before={TOO_BIG}", {}),
    ("GET", "/jobs?state=failed&before=-1", {}),
    ("GET", "/jobs?state=failed&before=abc", {}),
    ("GET", "/jobs?state=failed&before=1.5", {}),
    ("GET", f"/jobs?state=failed&before={quote('²')}", {}),
    ("GET", f"/?done=ok{NUL}", {}),
    # One job: its id, or its job_id.
    ("GET", f"/jobs/1{NUL}", {}),
    ("GET", f"/jobs/abc{NUL}def", {}),
    ("GET", f"/jobs/{TOO_BIG}", {}),
    ("GET", f"/jobs/{'9' * 40}", {}),
    ("GET", "/jobs/-1", {}),
    ("GET", f"/jobs/{quote('²')}", {}),
    # The batches: the list's filter and cursor, a batch's id, state and cursor.
    ("GET", f"/batches?status=op{NUL}en", {}),
    ("GET", f"/batches?before={TOO_BIG}", {}),
    ("GET", "/batches?before=abc", {}),
    ("GET", f"/batches/1{NUL}", {}),
    ("GET", f"/batches/{TOO_BIG}", {}),
    ("GET", "/batches/-1", {}),
    ("GET", f"/batches/{quote('²')}", {}),
    ("GET", f"/batches/1?state=rea{NUL}dy", {}),
    ("GET", "/batches/1?state=ready&before=-1", {}),
    ("GET", f"/batches?parent={TOO_BIG}", {}),
    ("GET", "/batches?parent=-1", {}),
    ("POST", f"/batches/1{NUL}/retry", {}),
    ("POST", f"/batches/{TOO_BIG}/retry", {}),
    ("POST", "/batches/-1/discard", {}),
    # The control pages' cursors.
    ("GET", f"/budgets?after=k{NUL}", {}),
    ("GET", f"/concurrency?after=k{NUL}", {}),
    ("GET", f"/concurrency?semaphores_after=k{NUL}", {}),
    ("GET", f"/recurring?after=k{NUL}", {}),
    ("GET", f"/coalescing?after=1{NUL}", {}),
    ("GET", f"/coalescing?after={TOO_BIG}", {}),
    ("GET", "/coalescing?after=-5", {}),
    ("GET", "/coalescing?after=x", {}),
    ("GET", f"/processes?after=1{NUL}", {}),
    ("GET", f"/processes?after={TOO_BIG}", {}),
    ("GET", "/processes?after=-5", {}),
    ("GET", "/processes?after=x", {}),
    # A job's actions: the id in the path, the state the form returns to.
    ("POST", f"/jobs/{TOO_BIG}/retry", {}),
    ("POST", f"/jobs/{TOO_BIG}/discard", {"state": "failed"}),
    ("POST", "/jobs/-1/run_now", {}),
    ("POST", "/jobs/abc/retry", {}),
    ("POST", f"/jobs/1{NUL}/retry", {}),
    ("POST", "/jobs/1/discard", {"state": "fail\x00ed"}),
    # Every failed job, filtered.
    ("POST", "/failed/retry", {"queue": "al\x00pha"}),
    ("POST", "/failed/retry", {"job": "ta\x00sk"}),
    ("POST", "/failed/discard", {"queue": "al\x00pha"}),
    ("POST", "/failed/discard", {"job": "ta\x00sk"}),
    # A queue's pause and resume.
    ("POST", f"/queues/al{NUL}pha/pause", {}),
    ("POST", f"/queues/al{NUL}pha/resume", {}),
    ("POST", f"/queues/{'q' * 256}/pause", {}),
    ("POST", f"/queues/{'q' * 300}/resume", {}),
]


def test_each_bad_input_answers_400_with_a_message_and_changes_nothing(app, engine, client):
    failed = failed_job(app, engine, "kept", queue="alpha")
    token = csrf_token(client)
    answers = {}
    for method, path, form in BAD_INPUTS:
        if method == "GET":
            response = client.get(PREFIX + path)
        else:
            response = client.post(PREFIX + path, data={csrf.FIELD: token, **form})
        answers[(method, path, tuple(form.items()))] = (response.status_code, response.text)
    wrong = {request: status for request, (status, _text) in answers.items() if status != 400}
    assert wrong == {}
    for request, (_status, text) in answers.items():
        assert any(
            words in text
            for words in ("NUL character", "is not a job id", "is not a batch id", "at most 255")
        ), request
    assert job_state(engine, failed) == "failed"
    assert paused(engine) == set()


def test_the_edges_of_the_checks_are_still_taken(app, engine, client):
    """The largest id, an empty cursor and a 255-character queue name are valid."""
    failed = failed_job(app, engine, "kept", queue="alpha")
    assert client.get(f"{PREFIX}/jobs/{LARGEST}").status_code == 404
    assert client.get(f"{PREFIX}/jobs?state=failed&before={LARGEST}").status_code == 200
    assert client.get(f"{PREFIX}/jobs?state=failed&before=").status_code == 200
    assert client.get(f"{PREFIX}/processes?after=0").status_code == 200
    assert client.get(f"{PREFIX}/jobs/{failed:010d}").status_code == 200  # leading zeros
    long_name = "q" * params.MAX_QUEUE_NAME
    response = post_from_page(client, f"/queues/{long_name}/pause")
    assert done_message(response) == f"Queue {long_name} paused."
    assert paused(engine) == {long_name}
    response = post_from_page(client, f"/jobs/{LARGEST}/retry")
    assert done_message(response) == "Retried 0 jobs."


def test_a_discard_returns_only_to_a_known_states_list(app, engine, client):
    failed = failed_job(app, engine, "kept", queue="alpha")
    token = csrf_token(client)
    response = client.post(
        f"{PREFIX}/jobs/{failed}/discard", data={csrf.FIELD: token, "state": "//evil.example"}
    )
    assert response.status_code == 303
    location = urlsplit(response.headers["Location"])
    assert (location.netloc, location.path) == ("", f"{PREFIX}/jobs")
    assert "state=failed" in location.query
    assert job_state(engine, failed) == "gone"


# 4. A queue path with "//".


@pytest.mark.parametrize("queue", ["/evil", "//evil", "a//b", "a/", "evil/"])
def test_a_queue_path_with_double_slashes_acts_on_the_queue_it_names(app, engine, client, queue):
    enqueue(app, jobs.task, "bystander", queue="evil")
    enqueue(app, jobs.task, "target", queue=queue)
    # The overview's own form for that queue: its action round-trips the name.
    overview = Page(client.get(PREFIX + "/").text)
    (action,) = [form for form in overview.forms if form.endswith(f"/queues/{queue}/pause")]
    response = post_from_page(client, action.removeprefix(PREFIX))
    assert response.status_code == 303
    location = urlsplit(response.headers["Location"])
    assert (location.netloc, location.path) == ("", f"{PREFIX}/")
    assert done_message(response) == f"Queue {queue} paused."
    assert paused(engine) == {queue}
    response = post_from_page(client, f"/queues/{queue}/resume")
    assert done_message(response) == f"Queue {queue} resumed."
    assert paused(engine) == set()


def test_a_double_slash_path_never_redirects_an_action(app, engine, client):
    """Werkzeug's answer to a path with "//" is a 308 to the path with the slashes merged,
    which a browser POSTs again: to ``/queues/evil/pause``, another queue."""
    enqueue(app, jobs.task, "bystander", queue="evil")
    for path in ("/queues//evil/pause", "/queues///evil/resume", "/queues/x//evil/pause"):
        response = post_from_page(client, path)
        assert response.status_code == 303, path
        assert urlsplit(response.headers["Location"]).path == f"{PREFIX}/"
    assert "evil" not in paused(engine)


# 2 (again). The pages under their policy, in a real browser.


def csp_violations(browser_page: BrowserPage) -> list[str]:
    """Console messages from here on that say the Content-Security-Policy refused something."""
    messages: list[str] = []
    browser_page.on(
        "console",
        lambda message: (
            messages.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    return messages


def test_in_a_browser_the_pages_work_under_their_policy(dashboard_app, page):
    from playwright.sync_api import expect

    with dashboard_app.app_context():
        engine = t.cast(sa.Engine, dashboard_app.extensions["solidq"].engine)
    ids = browser_tests.filled_dashboard(dashboard_app, engine)
    with dashboard_app.app_context():
        with solidq.batch(label="later") as batch:  # a bar with a pending segment
            jobs.task.set(wait=3600).perform_later("in a batch")
    violations = csp_violations(page)
    paths = ["/solidq/", "/solidq/jobs?state=failed", f"/solidq/jobs/{ids['failed']}"]
    paths += ["/solidq/budgets", "/solidq/coalescing", "/solidq/concurrency", "/solidq/recurring"]
    paths += ["/solidq/batches", f"/solidq/batches/{batch.id}"]
    for path in paths:
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        assert response.headers["content-security-policy"] == headers.CONTENT_SECURITY_POLICY
        # The stylesheet applied (the header's dark band), and htmx loaded.
        header = page.locator("header")
        expect(header).to_have_css("background-color", "rgb(29, 35, 48)")
        assert page.evaluate("typeof htmx") == "object", path

    # htmx's refresh fetches the overview again: a job enqueued now shows up on its own.
    page.goto("/solidq/")
    enqueue(dashboard_app, jobs.task, "new", queue="arrived")
    expect(page.get_by_role("cell", name="arrived", exact=True)).to_be_visible(timeout=10_000)

    # Discard asks first (a script file, not an inline handler); dismissed, nothing happens.
    questions: list[str] = []

    def dismiss(dialog: t.Any) -> None:
        questions.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.goto(f"/solidq/jobs/{ids['scheduled']}")
    page.get_by_role("button", name="Discard", exact=True).click()
    expect(page.get_by_role("heading", name=f"Job {ids['scheduled']}")).to_be_visible()
    assert questions == [f"Discard job {ids['scheduled']}? This deletes it."]
    assert job_state(engine, ids["scheduled"]) == "scheduled"
    assert violations == []
