"""The processes page's Quiet and Stop in a real browser, on a real `flask solidq work`, on
every backend: Quiet on the worker's row posts with the page's CSRF field, the row then says
"quieting" and the worker stops claiming; Stop on the supervisor's row asks ``confirm()``
first, and the page's live refresh shows the processes gone once the tree has stopped (exit
status 0).

Uses the browser, server and app of tests/dashboard/test_dashboard_browser.py (same Chromium,
same skip rules).
"""

from __future__ import annotations

import typing as t

import pytest

from tests import support
from tests.dashboard.test_dashboard_browser import base_url  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import browser  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import dashboard_app  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import engine  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import page  # noqa: F401 - a fixture
from tests.support import runtime as runtime_support

if t.TYPE_CHECKING:
    import pathlib

pytestmark = pytest.mark.processes


def test_quiet_and_stop_from_the_processes_page_in_a_browser(
    database_url: str,
    dashboard_app,  # noqa: F811
    engine,  # noqa: F811
    page,  # noqa: F811
    tmp_path: pathlib.Path,
):
    from playwright.sync_api import expect

    launcher = runtime_support.Launcher(database_url, tmp_path)
    try:
        work = launcher.start("--only", "worker")
        runtime_support.wait_for_kinds(engine, ["Supervisor(fork)", "Worker"])
        (worker,) = runtime_support.processes(engine, "Worker")
        (supervisor,) = runtime_support.processes(engine, "Supervisor(fork)")
        questions: list[str] = []

        def accept(dialog: t.Any) -> None:
            questions.append(dialog.message)
            dialog.accept()

        page.on("dialog", accept)
        page.goto("/solidq/processes")
        worker_row = page.locator(f"#process-{worker.id}")
        expect(worker_row.locator("td").nth(5)).to_have_text("running")

        worker_row.get_by_role("button", name="Quiet").click()

        expect(page.get_by_role("status")).to_have_text(f"Told Worker {worker.name} to quiet.")
        expect(worker_row.locator("td").nth(5)).to_have_text("quieting")
        expect(worker_row.get_by_role("button", name="Quiet")).to_have_count(0)
        support.wait_until(lambda: "is quiet: it claims no more jobs" in work.output(), timeout=10)

        page.locator(f"#process-{supervisor.id}").get_by_role("button", name="Stop").click()

        expect(page.get_by_role("status")).to_have_text(
            f"Told Supervisor(fork) {supervisor.name} to stop."
        )
        # The page refreshes itself (htmx) until the stopped tree has deregistered.
        expect(page.get_by_text("No process is running")).to_be_visible(timeout=20_000)
        assert work.wait(15) == 0, work.output()
        assert questions[0].startswith(f"Quiet Worker {worker.name}? It claims no more jobs")
        assert questions[1] == (
            f"Stop Supervisor(fork) {supervisor.name} and every process it runs? It stops"
            " gracefully and is not restarted."
        )
    finally:
        launcher.kill_all()
