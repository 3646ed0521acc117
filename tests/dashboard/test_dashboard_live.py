"""The dashboard's live pages in a real browser, on every backend: the header's Live/Paused
switch holds every refresh back while paused (a page stays as it was although the data
changed), remembers it from page to page, and lets the refreshes through again; a collecting
job's page lists its calls, a page at a time.

The fixtures (Chromium, the served app) are the browser test's
(:mod:`tests.dashboard.test_dashboard_browser`).
"""

from __future__ import annotations

import time
import typing as t

import pytest

from tests.dashboard import test_dashboard_browser as in_a_browser
from tests.jobs import coalesce as coalesce_jobs
from tests.jobs import job_action as jobs

if t.TYPE_CHECKING:
    from flask import Flask
    from playwright.sync_api import Page

# The browser test's fixtures, used here by their names.
browser = in_a_browser.browser
dashboard_app = in_a_browser.dashboard_app
engine = in_a_browser.engine
base_url = in_a_browser.base_url
page = in_a_browser.page

#: A quick refresh, so that a test sees several polls go by in well under a second each.
FAST = {"SOLIDQ_DASHBOARD_REFRESH_INTERVAL": 0.2}


def enqueue(app: Flask, count: int) -> None:
    with app.app_context():
        for index in range(count):
            jobs.task.perform_later(f"live-{index}")


def ready_cell(page: Page) -> t.Any:
    """The overview's count of ready jobs in the queue "default"."""
    row = page.locator("#overview tbody tr").filter(has_text="default")
    return row.locator("td").nth(1)


def held(page: Page) -> int:
    """How many refreshes the switch has held back on this page."""
    return int(page.locator("#live-toggle").get_attribute("data-held") or 0)


def wait_for_held(page: Page, more_than: int) -> None:
    """Wait (10 s at most) until the switch has held back more than ``more_than`` refreshes:
    asked of the page in Python, since the dashboard's CSP refuses Playwright's string
    predicates (they are evaluated)."""
    deadline = time.monotonic() + 10
    while held(page) <= more_than:
        assert time.monotonic() < deadline, f"no more than {more_than} refreshes held back"
        page.wait_for_timeout(50)


@pytest.mark.parametrize("dashboard_app", [FAST], indirect=True)
def test_the_live_switch_pauses_every_refresh_across_pages_and_resumes_them(dashboard_app, page):
    from playwright.sync_api import expect

    enqueue(dashboard_app, 1)
    page.goto("/solidq/")
    toggle = page.get_by_role("button", name="Live", exact=True)
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(ready_cell(page)).to_have_text("1")
    # Live: a new job shows up without a reload.
    enqueue(dashboard_app, 1)
    expect(ready_cell(page)).to_have_text("2")

    toggle.click()
    paused = page.get_by_role("button", name="Paused", exact=True)
    expect(paused).to_have_attribute("aria-pressed", "false")
    enqueue(dashboard_app, 1)
    wait_for_held(page, 2)  # three refreshes were due since the job came
    expect(ready_cell(page)).to_have_text("2")

    # Another page opens paused too (its own regions held back), and so does the overview.
    page.get_by_role("link", name="Ready", exact=True).click()
    expect(page.get_by_role("heading", level=1, name="Ready jobs")).to_be_visible()
    expect(paused).to_be_visible()
    wait_for_held(page, 0)
    page.get_by_role("link", name="Overview", exact=True).click()
    expect(ready_cell(page)).to_have_text("3")  # a page load is fresh
    enqueue(dashboard_app, 1)
    wait_for_held(page, 2)
    expect(ready_cell(page)).to_have_text("3")

    paused.click()
    expect(page.get_by_role("button", name="Live", exact=True)).to_be_visible()
    expect(ready_cell(page)).to_have_text("4")
    count = held(page)
    enqueue(dashboard_app, 1)
    expect(ready_cell(page)).to_have_text("5")
    assert held(page) == count


def test_a_collecting_jobs_page_lists_its_calls_a_page_at_a_time(dashboard_app, page, monkeypatch):
    from playwright.sync_api import expect

    from flask_solidq.dashboard import views

    monkeypatch.setattr(views, "CALLS_PAGE_SIZE", 2)
    with dashboard_app.app_context():
        jobs_ = [coalesce_jobs.collect.perform_later("acct-9", index) for index in range(3)]
    job_id = jobs_[0].provider_job_id
    assert {job.provider_job_id for job in jobs_} == {job_id}

    page.goto(f"/solidq/jobs/{job_id}")
    calls = page.locator("#calls")
    expect(calls.get_by_role("heading", level=2)).to_have_text("Calls (3 collected)")
    rows = calls.locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator("td").nth(1)).to_have_text('["acct-9", 0]')
    expect(rows.nth(1).locator("td").nth(1)).to_have_text('["acct-9", 1]')
    expect(rows.nth(0).locator("td").nth(2)).to_contain_text(" UTC")

    calls.get_by_role("link", name="Next calls").click()
    expect(rows).to_have_count(1)
    expect(rows.nth(0).locator("td").nth(1)).to_have_text('["acct-9", 2]')
    expect(calls.get_by_role("link", name="Next calls")).to_have_count(0)
    calls.get_by_role("link", name="First calls").click()
    expect(rows).to_have_count(2)


def test_the_overview_and_a_queues_page_draw_their_charts_with_labelled_axes(
    dashboard_app, engine, page
):
    from playwright.sync_api import expect

    in_a_browser.failed_job(dashboard_app, engine, "charted")
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text))

    page.goto("/solidq/")
    overview = page.locator("#overview svg.bars")
    expect(overview).to_have_attribute(
        "aria-label",
        "Jobs finished and failed per minute over the last hour, every queue: 0 finished, 1 failed",
    )
    expect(overview.locator("text.x-title")).to_have_text("Time (UTC)")
    expect(overview.locator("text.y-title")).to_have_text("Jobs per minute")
    expect(overview.locator("rect.failed")).to_have_count(1)

    page.get_by_role("link", name="default", exact=True).click()
    expect(page.get_by_role("heading", level=1, name="Queue default")).to_be_visible()
    charts = page.locator("svg.bars")
    expect(charts).to_have_count(2)
    expect(charts.nth(1).locator("text.y-title")).to_have_text("Jobs per 15 min")
    for index in range(2):
        expect(charts.nth(index).locator("text.x-tick")).to_have_count(5)
        box = charts.nth(index).locator("rect.failed").bounding_box()
        assert box is not None and box["height"] > 10  # drawn, to the scale's top (1)
    fill = charts.nth(0).locator("rect.failed").evaluate("rect => getComputedStyle(rect).fill")
    assert fill == "rgb(204, 51, 51)"  # from the stylesheet: no inline style
    assert not [text for text in refused if "Content Security Policy" in text], refused


def test_the_budgets_page_draws_each_budgets_admissions_against_its_limit(
    dashboard_app, engine, page
):
    from playwright.sync_api import expect

    from flask_solidq.operations import claim as claim_operation
    from tests import support
    from tests.jobs import rate_limit as rate_limit_jobs

    with dashboard_app.app_context():
        for note in ("admitted", "deferred"):
            rate_limit_jobs.global_job.perform_later(note)
    support.register_claimers(engine, [9002])
    selector = claim_operation.QueueSelector(("*",))
    assert len(claim_operation.claim_batch(engine, selector, 10, 9002).jobs) == 1

    page.goto("/solidq/budgets")
    chart = page.locator("#admissions svg.bars")
    expect(chart).to_have_count(1)
    expect(chart).to_have_attribute(
        "aria-label",
        "Admissions per second of rate_test.global/global over the last 3 minutes: 1 in all;"
        " limit 0.0166667 per second",
    )
    expect(chart.locator("text.y-title")).to_have_text("Admitted per second")
    expect(chart.locator("text.x-title")).to_have_text("Time (UTC)")
    expect(chart.locator("rect.admitted")).to_have_count(1)
    limit = chart.locator("line.limit").bounding_box()
    bar = chart.locator("rect.admitted").bounding_box()
    assert limit is not None and bar is not None
    assert bar["y"] < limit["y"]  # 1 in a second is far above 1 a minute


@pytest.mark.parametrize("dashboard_app", [FAST], indirect=True)
def test_the_failed_list_refreshes_but_not_while_a_box_of_it_is_ticked(dashboard_app, engine, page):
    from playwright.sync_api import expect

    first = in_a_browser.failed_job(dashboard_app, engine, "first")
    page.goto("/solidq/jobs?state=failed")
    rows = page.locator("#jobs tbody tr")
    expect(rows).to_have_count(1)
    second = in_a_browser.failed_job(dashboard_app, engine, "second")
    expect(rows).to_have_count(2)  # live: the new failure shows up without a reload

    # Someone ticks a box in the list (as a selection would have them do): the list holds still.
    page.evaluate(
        "() => { const box = document.createElement('input'); box.type = 'checkbox';"
        " box.id = 'chosen'; document.querySelector('#jobs').prepend(box); box.checked = true; }"
    )
    count = held(page)
    in_a_browser.failed_job(dashboard_app, engine, "third")
    wait_for_held(page, count + 2)
    expect(rows).to_have_count(2)
    assert page.locator("#chosen").is_checked()

    page.locator("#chosen").uncheck()
    expect(rows).to_have_count(3)
    expect(page.get_by_role("link", name=str(first), exact=True)).to_be_visible()
    expect(page.get_by_role("link", name=str(second), exact=True)).to_be_visible()
