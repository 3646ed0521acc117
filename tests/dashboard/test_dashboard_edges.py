"""The dashboard's edges of issue 36, through Flask's test client, on every backend:

1. A live region refreshes from its own route, built by ``url_for`` (queue names with ``#``,
   ``?``, ``%`` and slashes included, the query's filters and cursors kept); a path
   parameter with a ``.`` or ``..`` part answers 400 and changes nothing; every dashboard
   response says ``X-SolidQ-Dashboard: 1``, which ``dashboard.js`` requires before a swap
   (the browser side is tests/dashboard/test_dashboard_refresh_browser.py).
3. Every response of every dashboard route but the static files' says
   ``Cache-Control: no-store``.
4. Open only because of debug or testing mode, the dashboard answers loopback clients naming
   a loopback host, and 403 to anyone else; Basic auth or an ``@solidq.dashboard_auth``
   check opens it to every host.
"""

from __future__ import annotations

import html
import re
import typing as t
from urllib.parse import parse_qs
from urllib.parse import urlsplit

import pytest
from flask import url_for

from flask_solidq.dashboard import access
from flask_solidq.dashboard import csrf
from flask_solidq.storage.resources import resource_dir
from tests.dashboard import test_dashboard as dashboard_tests
from tests.dashboard.test_dashboard import csrf_token
from tests.dashboard.test_dashboard import failed_job
from tests.dashboard.test_dashboard import paused
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask
    from werkzeug.routing import Rule
    from werkzeug.test import TestResponse

# The dashboard tests' fixtures: the dashboard on, a request context per request, the job
# module's failures cleared, an @solidq.dashboard_auth rule.
clean_job_module = dashboard_tests.clean_job_module
app = dashboard_tests.app
_push_request_context = dashboard_tests._push_request_context
client = dashboard_tests.client
make_app = dashboard_tests.make_app
rule = dashboard_tests.rule

PREFIX = "/solidq"
BLUEPRINT = "solidq_dashboard"


def dashboard_url(app: Flask, endpoint: str, **values: t.Any) -> str:
    with app.test_request_context():
        return url_for(f"{BLUEPRINT}.{endpoint}", **values)


def refresh_url(response: TestResponse, region: str) -> str:
    """The ``hx-get`` of the live region ``region`` of a page, as the browser reads it."""
    assert response.status_code == 200, (response.status_code, response.text[:500])
    found = re.search(rf'<[a-z]+ id="{region}"[^>]*? hx-get="([^"]*)"', response.text)
    assert found is not None, response.text[:2000]
    return html.unescape(found.group(1))


# 1. Live refresh stays inside the dashboard.

QUEUE_NAMES = ["a#b", "c?d=1&e", "100%", "e%2Fx", "/mail", "a//b", "tail/", "f.g", "...", ".x"]


@pytest.mark.parametrize("queue", QUEUE_NAMES)
def test_a_queue_page_refreshes_from_its_own_url_whatever_the_name(app, client, queue):
    url = dashboard_url(app, "queue", queue=queue)
    refresh = refresh_url(client.get(url), "queue")
    assert refresh == url
    # The refresh shows the same queue: the name came back whole through the URL.
    again = client.get(refresh, headers={"HX-Request": "true"})
    assert f"Queue <code>{html.escape(queue)}</code>" in again.text


@pytest.mark.parametrize(
    ("endpoint", "region", "query"),
    [
        ("jobs", "jobs", {"state": ["failed"], "queue": ["a#b"], "job": ["X?y"], "before": ["7"]}),
        ("jobs", "jobs", {"state": ["ready"], "q": ["100% & more"]}),
        ("budgets", "budgets", {"after": ["key/../#1"]}),
        ("concurrency", "concurrency", {"after": ["k?"], "semaphores_after": ["s&t"]}),
        ("coalescing", "coalescing", {"after": ["12"]}),
        ("processes", "processes", {"after": ["3"]}),
        ("batches", "batches", {"status": ["open"], "before": ["9"]}),
        ("recurring", "recurring", {"after": ["nightly#2"]}),
    ],
)
def test_a_live_region_refreshes_with_the_filters_and_cursors_it_was_rendered_with(
    app, client, endpoint, region, query
):
    url = dashboard_url(app, endpoint, **query)
    refresh = urlsplit(refresh_url(client.get(url), region))
    assert refresh.path == urlsplit(url).path
    assert parse_qs(refresh.query, keep_blank_values=True) == query


def test_url_for_s_own_parameters_in_the_query_neither_break_nor_steer_the_refresh(app, client):
    url = PREFIX + "/queue/alpha?queue=beta&endpoint=solidq_dashboard.overview&_external=1"
    refresh = refresh_url(client.get(url), "queue")
    assert refresh == dashboard_url(app, "queue", queue="alpha")


def test_no_template_refreshes_from_the_request_s_raw_path():
    for template in sorted((resource_dir("templates") / "solidq").glob("*.html")):
        text = template.read_text()
        for raw in ("request.full_path", "request.url", "request.path", "request.query_string"):
            assert raw not in text, (template.name, raw)


TRAVERSALS = [
    "/queue/..%2F..%2Fpublic",
    "/queue/..%2Fjobs",
    "/queue/..",
    "/queue/%2E%2E",
    "/queue/a/../b",
    "/queue/.%2Fx",
    "/queue/mail/.",
    "/jobs/%2E%2E",
    "/batches/.",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_a_path_parameter_with_a_dot_part_answers_400_saying_why(client, path):
    response = client.get(PREFIX + path)
    assert response.status_code == 400, response.text[:500]
    assert "has a &#39;.&#39; or &#39;..&#39; part between slashes" in response.text
    assert response.headers["Cache-Control"] == "no-store"


def test_an_action_on_a_dot_path_changes_nothing(app, engine, client):
    failed = failed_job(app, engine, "kept", queue="alpha")
    token = csrf_token(client)
    for path in ("/queues/..%2Falpha/pause", "/queues/alpha%2F../pause", "/recurring/..%2Fx/run"):
        response = client.post(PREFIX + path, data={csrf.FIELD: token})
        assert response.status_code == 400, (path, response.text[:500])
        assert "part between slashes" in response.text
    assert paused(engine) == set()
    assert job_state(engine, failed) == "failed"


def test_every_dashboard_response_says_so_and_no_other_does(app, client):
    app.add_url_rule("/public", "public", lambda: "not the dashboard's")
    for path in ("/", "/jobs?state=failed", "/queue/%2E%2E", "/jobs/404", "/static/dashboard.js"):
        response = client.get(PREFIX + path)
        assert response.headers.get("X-SolidQ-Dashboard") == "1", path
        response.close()
    assert "X-SolidQ-Dashboard" not in client.get("/public").headers


# 3. Nothing cached.

#: A value for each argument of the dashboard's routes; a new argument fails the test below
#: until it has one here.
ARGUMENTS = {
    "queue": "alpha",
    "key": "nightly",
    "batch_id": "1",
    "process_id": "1",
    "filename": "dashboard.js",
}


def _arguments(rule: Rule, job_id: int) -> dict[str, str]:
    values = {**ARGUMENTS, "reference": str(job_id), "job_id": str(job_id)}
    for name in rule.arguments:
        converter = rule._converters[name]  # noqa: SLF001 - the choices of an <any(...)>
        choices = getattr(converter, "items", None)
        if choices:
            values[name] = sorted(choices)[0]
    return {name: values[name] for name in rule.arguments}


def dashboard_rules(app: Flask) -> list[Rule]:
    rules = [rule for rule in app.url_map.iter_rules() if rule.endpoint.startswith(BLUEPRINT)]
    assert len(rules) > 15  # the pages, the actions, /metrics, the static files
    return rules


def test_every_dashboard_route_answers_no_store_but_its_static_files(app, engine, client):
    job_id = failed_job(app, engine, "kept", queue="alpha")
    token = csrf_token(client)
    checked = set()
    for rule in dashboard_rules(app):
        url = dashboard_url(app, rule.endpoint.partition(".")[2], **_arguments(rule, job_id))
        if rule.endpoint == f"{BLUEPRINT}.static":
            response = client.get(url)
            assert response.status_code == 200
            assert "no-store" not in response.headers.get("Cache-Control", ""), url
            response.close()
            continue
        if "POST" in (rule.methods or ()):
            answers = [client.post(url, data={csrf.FIELD: token}), client.post(url)]
        else:
            answers = [client.get(url), client.get(url, headers={"HX-Request": "true"})]
        for response in answers:
            assert response.status_code < 500, (url, response.status_code)
            assert response.headers.get("Cache-Control") == "no-store", (url, response.status)
        checked.add(rule.endpoint.partition(".")[2])
    assert {"overview", "jobs", "job", "queue", "metrics", "job_action", "failed_action"} <= checked


def test_refusals_and_missing_pages_are_not_stored_either(client):
    for path in ("/jobs?state=nope", "/jobs/99999", "/jobs?queue=a%00b", "/batches/abc"):
        response = client.get(PREFIX + path)
        assert response.status_code in (400, 404), path
        assert response.headers["Cache-Control"] == "no-store", path


# 4. Debug and testing mode: loopback only.

LOOPBACK = [
    ("127.0.0.1", "localhost"),
    ("127.0.0.1", "localhost:5000"),
    ("127.0.0.1", "LocalHost."),
    ("127.0.0.1", "app.localhost:8000"),
    ("127.3.2.1", "127.0.0.1:8000"),
    ("127.0.0.1", "127.255.0.9"),
    ("::1", "[::1]:5000"),
    ("::1", "[::1]"),
    ("::ffff:127.0.0.1", "localhost"),
]
ELSEWHERE = [
    ("192.168.1.20", "localhost"),  # a colleague on the network
    ("10.0.0.1", "127.0.0.1:5000"),
    ("::2", "[::1]"),
    ("127.0.0.1", "attacker.example"),  # a DNS-rebinding page: its own name as the Host
    ("127.0.0.1", "attacker.example:5000"),
    ("127.0.0.1", "localhost.attacker.example"),
    ("127.0.0.1", "127.0.0.1.nip.io"),
    ("127.0.0.1", "localhostx"),
    ("127.0.0.1", "0.0.0.0:5000"),
    ("127.0.0.1", "[::2]:5000"),
    ("127.0.0.1", "192.168.1.20:5000"),
]


def from_(remote: str, host: str) -> dict[str, t.Any]:
    return {"environ_overrides": {"REMOTE_ADDR": remote, "HTTP_HOST": host}}


@pytest.mark.parametrize("mode", ["debug", "testing"])
@pytest.mark.parametrize(("remote", "host"), LOOPBACK)
def test_debug_or_testing_mode_opens_the_dashboard_to_this_machine(app, mode, remote, host):
    app.testing = mode == "testing"
    app.debug = mode == "debug"
    client = app.test_client()
    for path in ("/", "/jobs?state=failed", "/metrics"):
        response = client.get(PREFIX + path, **from_(remote, host))
        assert response.status_code in (200, 501), (path, response.text[:300])


@pytest.mark.parametrize("mode", ["debug", "testing"])
@pytest.mark.parametrize(("remote", "host"), ELSEWHERE)
def test_debug_or_testing_mode_answers_403_to_other_hosts_saying_how_to_open_it(
    app, engine, mode, remote, host
):
    failed = failed_job(app, engine, "kept", queue="alpha")
    app.testing = mode == "testing"
    app.debug = mode == "debug"
    client = app.test_client()
    for path in ("/", "/jobs?state=failed", f"/jobs/{failed}", "/metrics"):
        response = client.get(PREFIX + path, **from_(remote, host))
        assert response.status_code == 403, path
        assert "only to this machine" in response.text
        assert "SOLIDQ_DASHBOARD_BASIC_AUTH" in response.text
        assert "@solidq.dashboard_auth" in response.text
        assert "kept" not in response.text
    client.set_cookie(csrf.COOKIE, "token", path=PREFIX)
    for path in (f"/jobs/{failed}/discard", "/failed/discard", "/queues/alpha/pause"):
        response = client.post(PREFIX + path, headers={csrf.HEADER: "token"}, **from_(remote, host))
        assert response.status_code == 403, path
    assert job_state(engine, failed) == "failed"
    assert paused(engine) == set()


def test_the_refusal_names_the_address_and_host_it_saw(client):
    response = client.get(PREFIX + "/", **from_("203.0.113.9", "attacker.example:8080"))
    assert response.status_code == 403
    assert response.mimetype == "text/plain"
    assert "from 203.0.113.9 for the host 'attacker.example:8080'" in response.text
    assert response.text.startswith(access.LOOPBACK_ONLY.split(":")[0])


def test_basic_auth_opens_the_dashboard_to_other_hosts_even_in_debug_mode(make_app):
    for mode in ({"TESTING": True}, {"DEBUG": True}):
        protected = make_app(SOLIDQ_DASHBOARD_BASIC_AUTH=("admin", "s3cret"), **mode)
        client = protected.test_client()
        elsewhere = from_("203.0.113.9", "queue.example")
        assert client.get(PREFIX + "/", **elsewhere).status_code == 401
        opened = client.get(PREFIX + "/", auth=("admin", "s3cret"), **elsewhere)
        assert opened.status_code == 200


def test_a_dashboard_auth_check_opens_the_dashboard_to_other_hosts(client, rule):
    elsewhere = from_("203.0.113.9", "queue.example")
    rule["allow"] = True
    assert client.get(PREFIX + "/", **elsewhere).status_code == 200
    rule["allow"] = False
    assert client.get(PREFIX + "/", **elsewhere).status_code == 403
