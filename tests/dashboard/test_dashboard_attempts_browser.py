"""Attempt history and durations in a real browser, on every backend (issue 22, items 5 and
8): the failed list says when each job failed, a job's page lists its failed attempts (still
there after Retry), and the finished list, newest finish first, shows each run's duration.

Uses the browser, server and app of tests/dashboard/test_dashboard_browser.py (same Chromium,
same skip rules).
"""

from __future__ import annotations

import re
import typing as t

import sqlalchemy as sa

from flask_solidq import models
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import finish
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.dashboard.test_dashboard_browser import base_url  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import browser  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import dashboard_app  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import engine  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import page  # noqa: F401 - a fixture
from tests.jobs import job_action as jobs
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
FAILURES = t.cast(sa.Table, models.JobFailure.__table__)
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def run_all(app: Flask, queue: sa.Engine) -> None:
    """Claim, perform and finish every ready job (retries due at once included)."""
    while claimed := claim(queue, 100):
        finish(queue, perform(app, claimed))


def enqueue(app: Flask, definition: t.Any, note: str) -> int:
    with app.app_context():
        return t.cast(int, definition.perform_later(note).provider_job_id)


def test_failed_attempts_and_run_durations_in_a_browser(
    dashboard_app,  # noqa: F811
    engine,  # noqa: F811
    page,  # noqa: F811
):
    from playwright.sync_api import expect

    jobs.FAILURES["shaky"] = jobs.Flaky
    failed = enqueue(dashboard_app, jobs.retried, "shaky")  # retry_on(Flaky, attempts=2)
    done = [enqueue(dashboard_app, jobs.task, note) for note in ("first", "second")]
    run_all(dashboard_app, engine)
    assert job_state(engine, failed) == "failed"

    # The failed list says when the job failed.
    page.goto("/solidq/jobs?state=failed")
    expect(page.get_by_role("columnheader", name="Failed at")).to_be_visible()
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=str(failed)))
    expect(row.locator("td.failed-at")).to_have_text(re.compile(f"^{TIME}$"))

    # Its page lists both failed runs, newest first: the retry_on retry and the failure.
    row.get_by_role("link", name=str(failed), exact=True).click()
    expect(page.get_by_role("heading", name=f"Job {failed}")).to_be_visible()
    attempts = page.locator("#attempts tbody tr")
    message = "job_action_test.retried failed on purpose for shaky"
    expect(attempts).to_have_count(2)
    for index, run in enumerate(("2", "1")):
        cells = attempts.nth(index).locator("td")
        expect(cells.nth(0)).to_have_text(run)
        expect(cells.nth(1)).to_have_text(re.compile(f"^{TIME}$"))
        expect(cells.nth(2)).to_have_text("tests.jobs.job_action.Flaky")
        expect(cells.nth(3)).to_have_text(message)

    # Retried, the job's failed execution is gone; its attempts stay in view.
    page.get_by_role("button", name="Retry", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Retried 1 job.")
    assert job_state(engine, failed) == "ready"
    expect(page.get_by_role("heading", name="Error")).to_have_count(0)
    expect(page.locator("#attempts tbody tr")).to_have_count(2)

    # The finished list: newest finish first, each with its run's duration.
    del jobs.FAILURES["shaky"]
    run_all(dashboard_app, engine)
    with engine.connect() as connection:
        newest_first = connection.execute(
            sa.select(JOBS.c.id)
            .where(JOBS.c.finished_at.is_not(None))
            .order_by(JOBS.c.finished_at.desc(), JOBS.c.id.desc())
        ).scalars()
        expected = [str(job_id) for job_id in newest_first]
    assert sorted(expected) == sorted(str(job_id) for job_id in [*done, failed])
    page.goto("/solidq/jobs?state=finished")
    expect(page.get_by_role("columnheader", name="Duration")).to_be_visible()
    expect(page.locator("tbody tr td:first-child")).to_have_text(expected)
    expect(page.locator("tbody td.duration")).to_have_text(
        [re.compile(r"^\d+\.\d{3}s$")] * len(expected)
    )
    page.get_by_role("link", name=str(failed), exact=True).click()
    expect(page.locator("dd.duration")).to_have_text(
        re.compile(rf"^\d+\.\d{{3}}s \(started {TIME}\)$")
    )
    expect(page.locator("#attempts tbody tr")).to_have_count(2)
