"""The jobs list's search and selected rows in a real browser (headless Chromium, the fixtures
of tests/dashboard/test_dashboard_browser.py), on every backend: a search typed in the box,
the filters' names offered, rows checked one by one and all at once, and the selected
actions' forms (their CSRF field, Discard's question) doing what they say.
"""

from __future__ import annotations

import typing as t

from tests.dashboard import test_dashboard_browser as browser_tests
from tests.dashboard.test_dashboard_browser import failed_job
from tests.dashboard.test_dashboard_browser import scheduled_job
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from playwright.sync_api import Page

# The browser test's fixtures: Chromium, the app it serves over HTTP, a page of a fresh context.
browser = browser_tests.browser
dashboard_app = browser_tests.dashboard_app
engine = browser_tests.engine
base_url = browser_tests.base_url
page = browser_tests.page


def search_for(page: Page, text: str) -> None:
    page.get_by_role("searchbox", name="Search").fill(text)
    page.get_by_role("button", name="Filter", exact=True).click()


def listed(page: Page) -> list[int]:
    """The job ids of the list, in page order (the first cell of each body row)."""
    cells = page.locator("#jobs tbody tr td:first-child").all_inner_texts()
    return [int(cell) for cell in cells]


def test_a_search_finds_failed_jobs_by_error_text_and_id_and_the_selected_are_retried(
    dashboard_app, engine, page
):
    from playwright.sync_api import expect

    first = failed_job(dashboard_app, engine, "invoice-1")
    other = failed_job(dashboard_app, engine, "receipt-2")
    second = failed_job(dashboard_app, engine, "invoice-3")

    page.goto("/solidq/jobs?state=failed")
    expect(page.get_by_role("heading", name="Failed jobs")).to_be_visible()
    options = page.locator("#solidq-job-names option")
    expect(options).to_have_count(1)
    assert options.first.get_attribute("value") == "job_action_test.task"

    search_for(page, str(other))
    expect(page.locator("#jobs tbody tr")).to_have_count(1)
    assert listed(page) == [other]

    search_for(page, "INVOICE")
    expect(page.locator("#jobs tbody tr")).to_have_count(2)
    assert listed(page) == [second, first]
    retry = page.get_by_role("button", name="Retry selected")
    expect(retry).to_be_disabled()  # nothing selected yet
    page.get_by_role("checkbox", name="Select all on this page").check()
    expect(page.get_by_text("2 selected")).to_be_visible()
    expect(page.get_by_role("checkbox", name=f"Select job {first}")).to_be_checked()
    retry.click()

    expect(page.get_by_role("status")).to_have_text("Retried 2 jobs.")
    assert "q=INVOICE" in page.url  # back to the search it came from
    assert [job_state(engine, job) for job in (first, other, second)] == [
        "ready",
        "failed",
        "ready",
    ]
    expect(page.locator("#jobs tbody tr")).to_have_count(0)


def test_one_checked_scheduled_job_is_discarded_after_the_question(dashboard_app, engine, page):
    from playwright.sync_api import expect

    kept = scheduled_job(dashboard_app, "kept")
    dropped = scheduled_job(dashboard_app, "dropped")
    questions: list[str] = []

    def accept(dialog: t.Any) -> None:
        questions.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    page.goto("/solidq/jobs?state=scheduled")
    expect(page.locator("#jobs tbody tr")).to_have_count(2)
    expect(page.get_by_role("button", name="Retry selected")).to_have_count(0)
    page.get_by_role("checkbox", name=f"Select job {dropped}").check()
    select_all = page.get_by_role("checkbox", name="Select all on this page")
    assert select_all.evaluate("box => box.indeterminate") is True
    page.get_by_role("button", name="Discard selected").click()

    expect(page.get_by_role("status")).to_have_text("Discarded 1 job.")
    assert questions == ["Discard the selected jobs? This deletes them."]
    assert job_state(engine, dropped) == "gone"
    assert job_state(engine, kept) == "scheduled"
    assert listed(page) == [kept]
