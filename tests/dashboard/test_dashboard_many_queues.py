"""The overview with more queues than a page holds, on every backend: a page of 50 queues at a
time in the order of their names (keyset: ``?after=`` the last name of the previous page),
a search of the names (``?q=``, case-insensitive, anywhere in the name), each queue's figures
its own on whichever page it falls. Paging reaches every queue exactly once, paused queues
without jobs included.
"""

from __future__ import annotations

import typing as t
import urllib.parse

import pytest

from flask_solidq.operations import queues
from flask_solidq.reads import queue_pages
from tests import support
from tests.dashboard import test_dashboard as dashboard_tests
from tests.dashboard.test_dashboard import Page
from tests.dashboard.test_dashboard import clean_job_module  # noqa: F401
from tests.dashboard.test_dashboard import failed_job
from tests.dashboard.test_dashboard import get
from tests.jobs import dashboard as jobs
from tests.operations.test_job_actions import enqueue

if t.TYPE_CHECKING:
    import sqlalchemy as sa
    from flask import Flask
    from flask.testing import FlaskClient

# The dashboard tests' fixtures: the dashboard on, no request context kept pushed.
app = dashboard_tests.app
_push_request_context = dashboard_tests._push_request_context

PREFIX = "/solidq"
#: 120 queues with a job each: more than two pages.
NAMES = [f"queue-{number:03d}" for number in range(120)]
#: Paused, with no job: listed all the same.
PAUSED_ONLY = "queue-paused-only"
#: Names a search must take as text, not as patterns.
ODD = ["odd%name", "odd_name", "odd/slash"]


@pytest.fixture
def many(app: Flask, engine: sa.Engine) -> list[str]:
    """A job in each of :data:`NAMES` and :data:`ODD`, a paused queue without jobs; every
    queue name listed, in no particular order."""
    with app.app_context():
        support.solidq.perform_all_later(
            [jobs.task.set(queue=name).new(name) for name in NAMES + ODD]
        )
    queues.pause(engine, PAUSED_ONLY)
    return [*NAMES, *ODD, PAUSED_ONLY]


def queue_names(page: Page) -> list[str]:
    """The queues a page lists, in page order: the names linking to their own page."""
    prefix = PREFIX + "/queue/"
    return [
        urllib.parse.unquote(href[len(prefix) :])
        for _text, href in page.links
        if href.startswith(prefix)
    ]


def next_link(page: Page) -> str | None:
    links = [href for text, href in page.links if text.startswith("Next ")]
    assert len(links) <= 1
    return links[0] if links else None


def every_page(client: FlaskClient, path: str) -> list[list[str]]:
    """The queues of each page from ``path``, following the Next links to the last."""
    pages = []
    location: str | None = PREFIX + path
    while location is not None:
        assert len(pages) < 20, "the pages don't end"
        page = get(client, location, prefix="")
        pages.append(queue_names(page))
        location = next_link(page)
    return pages


def test_paging_the_overview_reaches_every_queue_exactly_once(client, many):
    pages = every_page(client, "/")
    assert len(pages) == 3
    assert [len(names) for names in pages] == [50, 50, len(many) - 100]
    seen = [name for names in pages for name in names]
    assert sorted(seen) == sorted(many)
    assert len(set(seen)) == len(seen)
    # Page after page in the database's order of names, which the cursor follows.
    assert pages[0][-1] < pages[1][0] and pages[1][-1] < pages[2][0]


def test_a_page_lists_at_most_a_page_of_queues(client, many):
    page = get(client, "/")
    assert len(queue_names(page)) == queue_pages.PAGE_SIZE
    assert next_link(page) == f"{PREFIX}/?after={queue_names(page)[-1]}"


def test_a_search_finds_a_queue_beyond_the_first_page(client, many):
    first = queue_names(get(client, "/"))
    assert "queue-117" not in first
    found = get(client, "/?q=QUEUE-117")
    assert queue_names(found) == ["queue-117"]
    assert next_link(found) is None


def test_a_search_pages_too_and_finds_every_match_once(client, many):
    matches = sorted(name for name in many if "queue-0" in name)
    assert len(matches) > queue_pages.PAGE_SIZE
    pages = every_page(client, "/?q=queue-0")
    seen = [name for names in pages for name in names]
    assert sorted(seen) == matches
    assert len(set(seen)) == len(seen)
    link = next_link(get(client, "/?q=queue-0"))
    assert link is not None and link.startswith(f"{PREFIX}/?q=queue-0&after=")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("%", ["odd%name"]),
        ("_", ["odd_name"]),
        ("/sl", ["odd/slash"]),
        ("paused-only", [PAUSED_ONLY]),
    ],
)
def test_a_search_takes_its_text_as_text(client, many, text, expected):
    assert queue_names(get(client, "/?" + urllib.parse.urlencode({"q": text}))) == expected


def test_a_search_no_queue_matches_says_so(client, many):
    page = get(client, "/?q=no-such-queue")
    assert queue_names(page) == []
    assert "No queue has a name containing no-such-queue ." in page.text


def test_a_queue_on_a_later_page_shows_its_own_figures(app, engine, client, many):
    # Runs every ready job: each queue's first finishes, this one fails.
    failed_job(app, engine, "broken", queue="queue-110")
    enqueue(app, jobs.task, "second", queue="queue-110")
    queues.pause(engine, "queue-110")
    pages = every_page(client, "/")
    (third,) = [names for names in pages if "queue-110" in names]
    assert third is pages[2]
    page = get(client, f"/?after={pages[1][-1]}")
    # Queue, ready, scheduled, deferred, in progress, blocked, failed, finished, latency,
    # paused, action.
    assert page.row("queue-110")[1:8] == ["1", "0", "0", "0", "0", "1", "1"]
    assert page.row("queue-110")[9:] == ["paused", "Resume"]
    assert page.row(PAUSED_ONLY)[1:8] == ["0"] * 7
    assert page.row(PAUSED_ONLY)[9:] == ["paused", "Resume"]


def test_a_page_past_the_last_queue_says_so(client, many):
    page = get(client, "/?after=zzz")
    assert queue_names(page) == []
    assert "No queue past this page's start." in page.text


def test_a_search_longer_than_a_queue_name_is_refused(client):
    response = client.get(PREFIX + "/?q=" + "x" * 256)
    assert response.status_code == 400
    assert "a queue&#39;s name has at most 255" in response.text


def test_the_refresh_keeps_the_page_and_the_search(client, many):
    markup = client.get(PREFIX + "/?q=queue-1&after=queue-105").text
    assert 'hx-get="/solidq/?q=queue-1&amp;after=queue-105"' in markup
