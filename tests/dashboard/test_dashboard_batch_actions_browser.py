"""A batch's "Retry failed jobs" in a real browser, on every backend: the button asks
``confirm()`` first, posts with the page's CSRF field, and lands back on the batch's page
saying how many jobs it retried, the batch pending again.

Uses the browser, server and app of tests/dashboard/test_dashboard_browser.py (same Chromium,
same skip rules).
"""

from __future__ import annotations

import typing as t

from tests.batches.test_batches import batch_counts
from tests.batches.test_batches import run_all
from tests.dashboard.test_dashboard_browser import base_url  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import browser  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import dashboard_app  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import engine  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import page  # noqa: F401 - a fixture
from tests.jobs import batch as batch_jobs
from tests.support import solidq
from tests.support.concurrency import job_state


def test_retry_failed_jobs_of_a_batch_in_a_browser(
    dashboard_app,  # noqa: F811
    engine,  # noqa: F811
    page,  # noqa: F811
):
    from playwright.sync_api import expect

    with dashboard_app.app_context():
        with solidq.batch() as parent:
            batch_jobs.work.perform_later(1)
        with solidq.batch(parent=parent.id) as child:
            failing = batch_jobs.fail.perform_later(2)
    run_all(dashboard_app, engine)
    batch_jobs.PERFORMED.clear()
    assert batch_counts(dashboard_app, parent.id)[0] == "failed"
    questions: list[str] = []

    def accept(dialog: t.Any) -> None:
        questions.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    page.goto(f"/solidq/batches/{parent.id}")
    expect(page.locator("h1 .status")).to_have_text("failed")
    expect(page.get_by_role("link", name=str(child.id), exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Discard pending jobs")).to_have_count(0)

    page.get_by_role("button", name="Retry failed jobs").click()

    expect(page.get_by_role("status")).to_have_text(f"Retried 1 failed job of batch {parent.id}.")
    question = f"Retry every failed job of batch {parent.id} and its children? It reopens."
    assert questions == [question]
    assert page.url.endswith(f"/solidq/batches/{parent.id}")
    expect(page.locator("h1 .status")).to_have_text("pending")
    assert job_state(engine, failing.provider_job_id) == "ready"
    assert batch_counts(dashboard_app, child.id)[0] == "pending"
    # Nothing failed is left: the button is gone; the retried job waits, so Discard is offered.
    expect(page.get_by_role("button", name="Retry failed jobs")).to_have_count(0)
    expect(page.get_by_role("button", name="Discard pending jobs")).to_be_visible()
