"""The stats page and the overview chart's windows in a real browser, on every backend: the
tables per job class and per queue over the last hour, the switch to the last week (which
brings in older runs), a job's own figures, and the overview's chart over 7 days.

Uses the browser, server and app of tests/dashboard/test_dashboard_browser.py (same Chromium,
same skip rules); the statistics are written as a worker writes them.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from flask_solidq.timing import utcnow
from tests.dashboard.test_dashboard_browser import ARTIFACTS
from tests.dashboard.test_dashboard_browser import base_url  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import browser  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import dashboard_app  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import engine  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import page  # noqa: F401 - a fixture
from tests.reads.test_job_stats import seed


def seed_a_week(engine: sa.Engine) -> None:  # noqa: F811
    """Report ran a minute ago (3 runs, one failed); Mail three days ago (2 runs)."""
    minute = utcnow().replace(second=0, microsecond=0)
    seed(
        engine,
        {
            (minute - dt.timedelta(minutes=1), "Report", "default"): [(0.003, 0.5, False)] * 2
            + [(0.3, 2.0, True)],
            (minute - dt.timedelta(days=3), "Mail", "low"): [(2.0, 0.0005, False)] * 2,
        },
    )


def rows_of(page, table: str) -> list[list[str]]:  # noqa: F811
    """The cells of a stats table's body, row by row."""
    rows = page.locator(f"#{table} tbody tr")
    return [rows.nth(i).locator("td").all_inner_texts() for i in range(rows.count())]


def test_the_stats_page_switches_its_window_and_narrows_to_a_job(
    engine,  # noqa: F811
    page,  # noqa: F811
    database_url: str,
):
    from playwright.sync_api import expect

    seed_a_week(engine)

    page.goto("/solidq/")
    page.get_by_role("link", name="Stats", exact=True).click()
    expect(page.get_by_role("heading", name="Stats")).to_be_visible()
    expect(page.get_by_role("link", name="1h", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    expect(page.locator("#stats-by-job tbody tr")).to_have_count(1)
    assert rows_of(page, "stats-by-job") == [
        ["Report", "3", "1", "33.3 %", "3.5ms", "300ms", "300ms", "448ms", "1.89s", "2.00s"]
    ]
    assert [row[0] for row in rows_of(page, "stats-by-queue")] == ["default"]
    chart = page.get_by_role("img", name="Runs per minute over the last 1h: 2 succeeded, 1 failed")
    expect(chart).to_be_visible()

    page.get_by_role("link", name="7d", exact=True).click()
    expect(page.get_by_role("link", name="7d", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    expect(page.locator("#stats-by-job tbody tr")).to_have_count(2)
    assert [row[:3] for row in rows_of(page, "stats-by-job")] == [
        ["Report", "3", "1"],
        ["Mail", "2", "0"],
    ]
    assert [row[0] for row in rows_of(page, "stats-by-queue")] == ["default", "low"]
    expect(
        page.get_by_role("img", name="Runs per hour over the last 7d: 4 succeeded, 1 failed")
    ).to_be_visible()
    folder = ARTIFACTS / database_url.split(":", 1)[0].split("+", 1)[0]
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / "stats.png"), full_page=True)

    page.locator("#stats-by-job").get_by_role("link", name="Mail", exact=True).click()
    expect(page.get_by_role("heading", name="Stats of Mail")).to_be_visible()
    expect(page.locator("#stats-by-job tbody tr")).to_have_count(1)
    assert rows_of(page, "stats-by-job")[0][:3] == ["Mail", "2", "0"]

    page.get_by_role("link", name="1h", exact=True).click()
    expect(page.get_by_text("No runs counted in the last 1h.")).to_be_visible()


def test_the_overview_chart_goes_back_a_week_from_the_statistics(
    engine,  # noqa: F811
    page,  # noqa: F811
):
    from playwright.sync_api import expect

    seed_a_week(engine)

    page.goto("/solidq/")
    nav = page.get_by_role("navigation", name="Chart window")
    expect(nav.get_by_role("link", name="1h", exact=True)).to_have_attribute("aria-current", "page")
    nav.get_by_role("link", name="7d", exact=True).click()

    expect(nav.get_by_role("link", name="7d", exact=True)).to_have_attribute("aria-current", "page")
    chart = page.get_by_role(
        "img", name="Runs per hour over the last 7d, every queue: 4 succeeded, 1 failed"
    )
    expect(chart).to_be_visible()
    expect(chart.locator("rect")).to_have_count(3)  # two hours: one of both kinds, one of one
    nav.get_by_role("link", name="1d", exact=True).click()
    expect(
        page.get_by_role(
            "img", name="Runs per 15 min over the last 1d, every queue: 2 succeeded, 1 failed"
        )
    ).to_be_visible()
