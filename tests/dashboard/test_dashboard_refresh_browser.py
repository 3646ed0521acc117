"""Live refresh stays inside the dashboard, in a real browser, on every backend (issue 36,
item 1). The attack it replays: a link to ``/solidq/queue/..%2F..%2Fpublic`` rendered the
queue page, whose refresh (its own raw path, which the browser resolved) fetched ``/public``;
htmx swapped that page's markup in and ran its ``hx-post`` with the dashboard's CSRF header,
discarding every failed job. Here the app serves such markup at ``/public`` and at
``/solidq/outside`` (a path under the dashboard's prefix that isn't the blueprint's), and the
server records every request it hears: no POST may arrive, and each refresh must ask for its
own page.

Uses the browser and server of tests/dashboard/test_dashboard_browser.py (same Chromium, same
skip rules), with a refresh every 0.2 s.
"""

from __future__ import annotations

import dataclasses
import threading
import typing as t

import pytest
from flask import request
from flask import url_for

from tests import support
from tests.dashboard.test_dashboard_browser import base_url  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import browser  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import engine  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import failed_job
from tests.dashboard.test_dashboard_browser import page  # noqa: F401 - a fixture
from tests.jobs import job_action as jobs
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    import sqlalchemy as sa
    from flask import Flask
    from playwright.sync_api import Page

#: Seconds between two refreshes: several within a second, so the waits below stay short.
REFRESH_SECONDS = 0.2
#: What an outside page serves: a region with the ids the dashboard's refreshes select, each
#: posting a discard of every failed job as soon as it is in the page.
HOSTILE = "".join(
    f'<div id="{region}" hx-post="/solidq/failed/discard" hx-trigger="load">owned</div>'
    for region in ("queue", "jobs")
)


@dataclasses.dataclass(frozen=True)
class Heard:
    """One request the app received."""

    method: str
    #: The path and query as the browser sent them (percent-encoding kept).
    uri: str
    endpoint: str | None
    view_args: dict[str, t.Any]
    args: dict[str, list[str]]
    #: Whether htmx sent it (a refresh), not a navigation.
    htmx: bool


class Ear:
    """Every request the served app hears, in order (requests come on server threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heard: list[Heard] = []

    def hear(self) -> None:
        entry = Heard(
            request.method,
            request.environ.get("REQUEST_URI", request.full_path),
            request.endpoint,
            dict(request.view_args or {}),
            request.args.to_dict(flat=False),
            "HX-Request" in request.headers,
        )
        with self._lock:
            self._heard.append(entry)

    @property
    def heard(self) -> list[Heard]:
        with self._lock:
            return list(self._heard)

    def refreshes(self, endpoint: str, **view_args: t.Any) -> list[Heard]:
        """The htmx GETs of the dashboard's page ``endpoint`` with these route arguments."""
        return [
            entry
            for entry in self.heard
            if entry.htmx
            and entry.method == "GET"
            and entry.endpoint == f"solidq_dashboard.{endpoint}"
            and entry.view_args == view_args
        ]


@pytest.fixture
def dashboard_app(database_url: str) -> t.Iterator[Flask]:
    """Overrides the browser tests' app: the dashboard open (TESTING), refreshing fast."""
    settings = {"SOLIDQ_DASHBOARD_REFRESH_INTERVAL": REFRESH_SECONDS}
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True, **settings) as app:
        yield app
    jobs.FAILURES.clear()
    jobs.PERFORMED.clear()


@pytest.fixture
def ear(dashboard_app: Flask) -> Ear:
    """Records every request of the app, which also serves the hostile markup outside the
    blueprint (set up before the server hears its first request)."""
    listening = Ear()
    dashboard_app.before_request(listening.hear)
    dashboard_app.add_url_rule("/public", "public", lambda: HOSTILE)
    dashboard_app.add_url_rule("/solidq/outside", "outside", lambda: HOSTILE)
    return listening


def dashboard_url(app: Flask, endpoint: str, **values: t.Any) -> str:
    with app.test_request_context():
        return url_for(f"solidq_dashboard.{endpoint}", **values)


def wait_for_refreshes(ear: Ear, count: int, endpoint: str, **view_args: t.Any) -> list[Heard]:
    """Wait until page ``endpoint`` was refreshed ``count`` times: by then every other open
    page, refreshing as often, has refreshed too."""
    return t.cast(
        "list[Heard]",
        support.wait_until(
            lambda: len(found := ear.refreshes(endpoint, **view_args)) >= count and found
        ),
    )


def assert_no_post_and_nothing_discarded(ear: Ear, queue: sa.Engine, job_id: int) -> None:
    assert [entry for entry in ear.heard if entry.method != "GET"] == []
    assert job_state(queue, job_id) == "failed"


def test_a_traversal_link_answers_400_and_nothing_follows_it(
    dashboard_app,
    engine,  # noqa: F811
    page,  # noqa: F811
    ear,
):
    from playwright.sync_api import expect

    failed = failed_job(dashboard_app, engine, "kept")
    attacks = [
        "/solidq/queue/..%2F..%2Fpublic",
        "/solidq/queue/..%2Foutside",
        "/solidq/queue/..%2F..%2Fsolidq%2Ffailed%2Fdiscard",
    ]
    tabs: list[Page] = []
    for path in attacks:
        tab = page.context.new_page()
        response = tab.goto(path)
        assert response is not None and response.status == 400, path
        expect(tab.locator("body")).to_contain_text("part between slashes")
        tabs.append(tab)
    # The attack tabs stay open while a page of the dashboard refreshes three times.
    page.goto(dashboard_url(dashboard_app, "queue", queue="default"))
    wait_for_refreshes(ear, 3, "queue", queue="default")

    assert [entry.uri for entry in ear.heard if entry.endpoint in ("public", "outside")] == []
    assert sorted(entry.uri for entry in ear.heard if entry.uri in attacks) == sorted(attacks)
    assert_no_post_and_nothing_discarded(ear, engine, failed)


def test_htmx_requests_and_swaps_only_the_dashboards_own_pages(
    dashboard_app,
    engine,  # noqa: F811
    page,  # noqa: F811
    ear,
):
    failed = failed_job(dashboard_app, engine, "kept")
    page.goto(dashboard_url(dashboard_app, "queue", queue="default"))
    wait_for_refreshes(ear, 1, "queue", queue="default")

    # What a crafted refresh would do: fetch a page outside the dashboard into the region.
    outcome = page.evaluate(
        """async () => {
          // From the body, not the region: htmx drops a request from an element whose own
          // refresh is in flight, and the region refreshes on its own.
          const into = {source: "body", target: "#queue", select: "#queue", swap: "outerHTML"};
          const said = {};
          for (const path of ["/public", "/solidq/outside", "/solidq/../public"]) {
            try { await htmx.ajax("GET", path, into); said[path] = "answered"; }
            catch (error) { said[path] = "refused"; }
          }
          return said;
        }"""
    )
    # Outside the dashboard's root: never sent. Under it but not the blueprint's: sent (the
    # browser can't know), answered, and not swapped in.
    assert outcome["/solidq/outside"] == "answered"
    assert [entry.endpoint for entry in ear.heard if entry.endpoint in ("public", "outside")] == [
        "outside"
    ]
    # The page still refreshes its own region, and nothing of the outside page is in it.
    done = len(ear.refreshes("queue", queue="default"))
    wait_for_refreshes(ear, done + 2, "queue", queue="default")
    assert "owned" not in page.content()
    assert_no_post_and_nothing_discarded(ear, engine, failed)


QUEUE_NAMES = ["a#b", "c?d=1", "e%2Fx", "100%", "/mail", "a//b"]


def test_each_page_refreshes_its_own_url_whatever_its_queue_is_named(
    dashboard_app,
    engine,  # noqa: F811
    page,  # noqa: F811
    ear,
):
    failed = failed_job(dashboard_app, engine, "kept")
    for queue in QUEUE_NAMES:
        url = dashboard_url(dashboard_app, "queue", queue=queue)
        page.goto(url)
        (first, *_) = wait_for_refreshes(ear, 1, "queue", queue=queue)
        assert first.uri == url, queue

    # A list filtered by such a queue keeps its filters in its refresh.
    url = dashboard_url(dashboard_app, "jobs", state="failed", queue="a#b", job="x?y")
    page.goto(url)
    support.wait_until(
        lambda: [
            entry
            for entry in ear.refreshes("jobs")
            if entry.args == {"state": ["failed"], "queue": ["a#b"], "job": ["x?y"]}
        ]
    )
    assert_no_post_and_nothing_discarded(ear, engine, failed)
