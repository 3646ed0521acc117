"""The dashboard on a phone (a 390x844 window), in a real browser, on every backend: no page
scrolls sideways, the nav folds into one line behind a Menu button, every table's rows stack
with their actions on screen, a failed job is retried and another discarded from the failed
list, and the charts' labels keep a legible size. Every page is saved as a screenshot,
``phone-<page>.png`` beside the desktop ones (test-artifacts/dashboard/<backend>/).

Uses the browser, server and app of tests/dashboard/test_dashboard_browser.py (same Chromium,
same skip rules).
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa

from flask_solidq.operations import claim as claim_operation
from tests import support
from tests.dashboard.test_dashboard_browser import ARTIFACTS
from tests.dashboard.test_dashboard_browser import SCROLLS_INSIDE
from tests.dashboard.test_dashboard_browser import base_url  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import batch_of_two
from tests.dashboard.test_dashboard_browser import browser  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import dashboard_app  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import engine  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import every_page
from tests.dashboard.test_dashboard_browser import failed_job
from tests.dashboard.test_dashboard_browser import filled_dashboard
from tests.dashboard.test_dashboard_browser import page  # noqa: F401 - a fixture
from tests.jobs import rate_limit as rate_limit_jobs
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from playwright.sync_api import Locator
    from playwright.sync_api import Page

PHONE = {"width": 390, "height": 844}

#: The page's width beyond the window's, in CSS pixels (0: it doesn't scroll sideways).
SIDEWAYS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"

#: The smallest height a chart's label may have on screen, in CSS pixels.
LEGIBLE = 10


def on_screen(locator: Locator) -> bool:
    """Whether ``locator``'s box lies within the phone's window, sideways."""
    box = locator.bounding_box()
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]


def test_no_page_scrolls_sideways_on_a_phone_and_every_table_stacks(
    dashboard_app,  # noqa: F811
    engine,  # noqa: F811
    database_url,
    page,  # noqa: F811
):
    from playwright.sync_api import expect

    batch_id, _ = batch_of_two(dashboard_app, engine)
    ids = filled_dashboard(dashboard_app, engine)
    folder = ARTIFACTS / sa.make_url(database_url).get_backend_name()
    folder.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size(PHONE)
    for name, (path, heading, _shown) in every_page(batch_id, ids).items():
        page.goto(path)
        expect(page.get_by_role("heading", level=1, name=heading)).to_be_visible()
        assert page.evaluate(SIDEWAYS) <= 0, name
        # No table is wider than its box: its rows are stacked, each cell named.
        assert not page.evaluate(SCROLLS_INSIDE), name
        for cell in page.locator("main td[data-label]").all():
            if cell.text_content() or cell.locator("input, button").count():  # else hidden
                assert on_screen(cell), (name, cell.get_attribute("data-label"))
        page.screenshot(path=str(folder / f"phone-{name}.png"), full_page=True)


def test_the_nav_takes_one_line_on_a_phone_and_opens_behind_its_menu_button(
    dashboard_app,  # noqa: F811
    page,  # noqa: F811
):
    from playwright.sync_api import expect

    page.set_viewport_size(PHONE)
    page.goto("/solidq/")
    header = page.locator("header")
    links = header.get_by_role("link")
    closed = header.bounding_box()
    assert closed is not None and closed["height"] < 50  # one line: name, Menu, Live
    expect(links.first).to_be_hidden()

    menu = header.get_by_role("button", name="Menu")
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    for link in links.all():
        expect(link).to_be_visible()
        assert on_screen(link), link.text_content()
    header.get_by_role("link", name="Processes", exact=True).click()
    expect(page.get_by_role("heading", level=1, name="Processes")).to_be_visible()
    assert page.evaluate(SIDEWAYS) <= 0


def test_a_failed_job_is_retried_and_another_discarded_from_the_failed_list_on_a_phone(
    dashboard_app,  # noqa: F811
    engine,  # noqa: F811
    page,  # noqa: F811
):
    from playwright.sync_api import expect

    retried = failed_job(dashboard_app, engine, "to retry")
    discarded = failed_job(dashboard_app, engine, "to discard")
    page.on("dialog", lambda dialog: dialog.accept())
    page.set_viewport_size(PHONE)
    page.goto("/solidq/jobs?state=failed")

    box = page.get_by_role("checkbox", name=f"Select job {retried}")
    expect(box).to_be_visible()
    assert on_screen(box)
    box.check()
    retry = page.get_by_role("button", name="Retry selected")
    expect(retry).to_be_enabled()
    assert on_screen(retry)
    retry.click()
    expect(page.get_by_role("status")).to_have_text("Retried 1 job.")
    assert job_state(engine, retried) == "ready"

    box = page.get_by_role("checkbox", name=f"Select job {discarded}")
    assert on_screen(box)
    box.check()
    discard = page.get_by_role("button", name="Discard selected")
    assert on_screen(discard)
    discard.click()
    expect(page.get_by_role("status")).to_have_text("Discarded 1 job.")
    assert job_state(engine, discarded) == "gone"
    assert page.evaluate(SIDEWAYS) <= 0


def test_the_charts_labels_stay_legible_and_apart_on_a_phone(
    dashboard_app,  # noqa: F811
    engine,  # noqa: F811
    page,  # noqa: F811
):
    from playwright.sync_api import expect

    failed_job(dashboard_app, engine, "charted")
    with dashboard_app.app_context():
        rate_limit_jobs.global_job.perform_later("admitted")
    support.register_claimers(engine, [9003])
    claim_operation.claim_batch(engine, claim_operation.QueueSelector(("*",)), 10, 9003)
    page.set_viewport_size(PHONE)
    for path in ("/solidq/", "/solidq/queue/default", "/solidq/budgets"):
        page.goto(path)
        charts = page.locator("svg.bars")
        expect(charts.first).to_be_visible()
        for chart in charts.all():
            assert_legible(page, chart)


def assert_legible(window: Page, chart: Locator) -> None:
    """Every label of ``chart`` is at least :data:`LEGIBLE` pixels high and on screen, and
    the time labels don't overlap."""
    for label in chart.locator("text").all():
        box = label.bounding_box()
        assert box is not None and box["height"] >= LEGIBLE, label.text_content()
        assert on_screen(label), label.text_content()
    boxes = [label.bounding_box() for label in chart.locator("text.x-tick").all()]
    assert len(boxes) >= 4
    for left, right in zip(boxes, boxes[1:], strict=False):
        assert left is not None and right is not None
        assert left["x"] + left["width"] < right["x"]
    assert window.evaluate(SIDEWAYS) <= 0
