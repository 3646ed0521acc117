"""The dashboard in a real browser, on every backend: headless Chromium (Debian's
``/usr/bin/chromium``, driven by Playwright) against the app served over HTTP in a thread.

What only a browser shows: the pages link up, htmx loads, an action is a form POST that carries
the CSRF field from the cookie the page set, Discard asks ``confirm()`` first, and each action
lands back on a page saying what it did (once: a reload doesn't say it again), with the
database changed to match. And what each
page looks like: every page, with data in it, is saved as a full-page screenshot under
``test-artifacts/dashboard/<backend>/<page>.png``.

CI installs Playwright (the ``test`` extra) and Chromium (.ci/run); there, missing either fails
the test. On a machine without them, and without ``SOLIDQ_REQUIRE_ALL_BACKENDS``, it skips.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import threading
import typing as t

import pytest
import sqlalchemy as sa
from werkzeug.serving import BaseWSGIServer
from werkzeug.serving import make_server

from example_app.screenshots import CHROMIUM  # launched as the README's screenshots are
from example_app.screenshots import CHROMIUM_ARGS
from flask_solidq import models
from flask_solidq.operations import claim as claim_operation
from flask_solidq.timing import utcnow
from tests import support
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import finish
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.jobs import coalesce as coalesce_jobs
from tests.jobs import concurrency as concurrency_jobs
from tests.jobs import job_action as jobs
from tests.jobs import rate_limit as rate_limit_jobs
from tests.support import solidq
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask
    from playwright.sync_api import Browser
    from playwright.sync_api import Page

#: Where the screenshots of every page go, one folder per backend (git ignores it; CI can keep
#: it as an artifact).
ARTIFACTS = pathlib.Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
#: Playwright's wait for a navigation or a click, in milliseconds (``expect`` waits its own
#: 5 s): a page of this app answers in far less, and a failing wait ends the test well under 30 s.
WAIT_MS = 10_000

JOBS = t.cast(sa.Table, models.JobRecord.__table__)


def _missing(reason: str) -> t.NoReturn:
    """Fail in CI, where both are installed; skip on a developer's machine without them."""
    if os.environ.get("SOLIDQ_REQUIRE_ALL_BACKENDS"):
        pytest.fail(f"{reason}: CI installs it (.ci/run), so this run can't test the dashboard")
    pytest.skip(reason)


@pytest.fixture
def browser() -> t.Iterator[Browser]:
    """Headless Chromium with a fresh profile (Playwright makes a temporary one per launch)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright is not installed (pip install -e '.[test]')")
    if shutil.which(CHROMIUM) is None:
        _missing(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    before = set(threading.enumerate())
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
    _join_executor_threads(before)


def _join_executor_threads(before: set[threading.Thread]) -> None:
    """Wait for the threads of the default executor of Playwright's event loop ("asyncio_N"),
    which its exit leaves to end on their own, so a loaded machine doesn't fail the next
    check for threads a test left running."""
    for thread in set(threading.enumerate()) - before:
        if thread.name.startswith("asyncio_"):
            thread.join(timeout=10)


@pytest.fixture
def dashboard_app(database_url: str, request: pytest.FixtureRequest) -> t.Iterator[Flask]:
    """An app with the dashboard on (open: TESTING), and the settings a test passes with
    ``indirect``; its tables are emptied afterwards."""
    settings = getattr(request, "param", {})
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True, **settings) as app:
        yield app
    jobs.FAILURES.clear()
    jobs.PERFORMED.clear()


@pytest.fixture
def engine(dashboard_app: Flask) -> sa.Engine:
    with dashboard_app.app_context():
        return t.cast("sa.Engine", dashboard_app.extensions["solidq"].engine)


@pytest.fixture
def base_url(dashboard_app: Flask) -> t.Iterator[str]:
    """The app served on a free port of 127.0.0.1, a thread per request, until the test ends.
    Request threads are joined on close (the browser is closed first, so none waits on an
    idle connection)."""
    server = make_server("127.0.0.1", 0, dashboard_app, threaded=True)
    server.daemon_threads = False  # socketserver joins non-daemon request threads on close
    thread = threading.Thread(target=server.serve_forever, name="dashboard-server")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        _stop(server, thread)


def _stop(server: BaseWSGIServer, thread: threading.Thread) -> None:
    server.shutdown()
    thread.join(timeout=10)
    server.server_close()


@pytest.fixture
def page(browser: Browser, base_url: str) -> t.Iterator[Page]:
    """A page of a fresh browser context (its own cookies), closed before the server stops."""
    context = browser.new_context(base_url=base_url)
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    yield page
    context.close()


def failed_job(app: Flask, engine: sa.Engine, note: str) -> int:
    """A job that ran in this process and raised ValueError; its id."""
    jobs.FAILURES[note] = ValueError
    with app.app_context():
        job_id = t.cast(int, jobs.task.perform_later(note).provider_job_id)
    claimed: list[claim_operation.ClaimedJob] = claim(engine)
    finish(engine, perform(app, claimed))
    assert job_state(engine, job_id) == "failed"
    return job_id


def scheduled_job(app: Flask, note: str) -> int:
    """A job due in an hour; its id."""
    with app.app_context():
        return t.cast(int, jobs.task.set(wait=3600).perform_later(note).provider_job_id)


def test_the_dashboard_in_a_browser_retries_a_failed_job_and_discards_a_scheduled_one(
    dashboard_app, engine, page
):
    from playwright.sync_api import expect

    failed = failed_job(dashboard_app, engine, "broken")
    scheduled = scheduled_job(dashboard_app, "later")

    page.goto("/solidq/")
    expect(page.get_by_role("cell", name="default", exact=True)).to_be_visible()
    assert page.evaluate("typeof htmx") == "object"

    # A failed job: find it in the list, read its error, retry it.
    page.get_by_role("link", name="Failed", exact=True).click()
    expect(page.get_by_role("heading", name="Failed jobs")).to_be_visible()
    page.get_by_role("link", name=str(failed), exact=True).click()
    expect(page.get_by_role("heading", name=f"Job {failed}")).to_be_visible()
    error = page.locator("h2:text-is('Error') + p")
    expect(error).to_have_text(
        "builtins.ValueError: job_action_test.task failed on purpose for broken"
    )
    backtrace = error.locator("xpath=following-sibling::pre[1]")
    expect(backtrace).to_contain_text("Traceback")
    expect(backtrace).to_contain_text("jobs/job_action.py")
    page.get_by_role("button", name="Retry", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Retried 1 job.")
    assert job_state(engine, failed) == "ready"
    # The message came in a cookie, not the URL, and was said once: a reload doesn't repeat it.
    assert page.url.endswith(f"/solidq/jobs/{failed}")
    page.reload()
    expect(page.get_by_role("heading", name=f"Job {failed}")).to_be_visible()
    expect(page.get_by_role("status")).to_have_count(0)

    # A scheduled job: Discard asks first; accepted, the job is gone.
    questions: list[str] = []

    def accept(dialog: t.Any) -> None:
        questions.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    page.get_by_role("link", name="Scheduled", exact=True).click()
    page.get_by_role("link", name=str(scheduled), exact=True).click()
    expect(page.get_by_role("heading", name=f"Job {scheduled}")).to_be_visible()
    page.get_by_role("button", name="Discard", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Discarded 1 job.")
    assert questions == [f"Discard job {scheduled}? This deletes it."]
    assert job_state(engine, scheduled) == "gone"
    assert job_state(engine, failed) == "ready"


@pytest.mark.parametrize(
    "dashboard_app",
    [
        {
            "SOLIDQ_RECURRING": {
                "sweep": {
                    "job": f"{jobs.__name__}:task",
                    "schedule": "every day",
                    "args": ["swept"],
                }
            }
        }
    ],
    indirect=True,
)
def test_a_recurring_task_runs_now_from_its_row_and_says_which_job_once(
    dashboard_app, engine, page
):
    from playwright.sync_api import expect

    from flask_solidq.recurring import tasks

    with dashboard_app.app_context():
        configured = dashboard_app.extensions["solidq"].settings.recurring
        tasks.persist_all(engine, tasks.load_all(configured))

    page.goto("/solidq/recurring")
    row = page.get_by_role("row").filter(has_text="sweep")
    expect(row).to_contain_text("never")
    row.get_by_role("button", name="Run now", exact=True).click()

    (job,) = support.rows(engine, JOBS)
    expect(page.get_by_role("status")).to_have_text(
        f"Recurring task sweep: enqueued job {job.id} ({job.class_name})."
    )
    expect(page.get_by_role("row").filter(has_text="sweep")).not_to_contain_text("never")
    assert page.url.endswith("/solidq/recurring")
    page.reload()
    expect(page.get_by_role("heading", name="Recurring tasks")).to_be_visible()
    expect(page.get_by_role("status")).to_have_count(0)


def filled_dashboard(app: Flask, engine: sa.Engine) -> dict[str, int]:
    """A queue with something on every page: a failed, a finished, a scheduled, a deferred
    and a claimed job (with their rate-limit budget), a collecting job's open key, a blocked
    job and its semaphore, a ready one, a process and a recurring task. A job's id for each
    state."""
    ids = {"failed": failed_job(app, engine, "broken")}  # claims the only ready job
    with app.app_context():
        ids["finished"] = t.cast(int, jobs.task.perform_later("done").provider_job_id)
    finish(engine, perform(app, claim(engine)))
    assert job_state(engine, ids["finished"]) == "finished"
    ids["scheduled"] = scheduled_job(app, "later")
    with app.app_context():
        for note in ("admitted", "deferred"):
            rate_limit_jobs.global_job.perform_later(note)
    support.register_claimers(engine, [9001])
    batch = claim_operation.claim_batch(engine, claim_operation.QueueSelector(("*",)), 10, 9001)
    ((ids["claimed"],), (ids["deferred"],)) = (
        [job.id for job in batch.jobs],
        [entry.job.id for entry in batch.deferrals],
    )
    with app.app_context():
        for index in range(2):  # under its max_calls (3): the key stays open
            coalesce_jobs.collect.perform_later("acct-5", index)
        _holder, blocked = (concurrency_jobs.limited.perform_later("acct-7") for _ in range(2))
        ids["blocked"] = t.cast(int, blocked.provider_job_id)
        ids["ready"] = t.cast(int, jobs.task.perform_later("waiting").provider_job_id)
    _add_process_and_recurring_task(engine)
    return ids


def _add_process_and_recurring_task(engine: sa.Engine) -> None:
    """A live worker's row, and a recurring task's (as a scheduler would store them)."""
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(
            sa.insert(models.ProcessRecord),
            [{"kind": "Worker", "name": "worker-1", "pid": 4242, "last_heartbeat_at": now}],
        )
        connection.execute(
            sa.insert(models.RecurringTask),
            [
                {
                    "key": "nightly_cleanup",
                    "schedule": "every day at 3am",
                    "class_name": "job_action_test.task",
                    "static": True,
                    "created_at": now,
                    "updated_at": now,
                }
            ],
        )


def every_page(batch_id: int, ids: dict[str, int]) -> dict[str, tuple[str, str, str | int]]:
    """Every page of the dashboard filled by :func:`batch_of_two` and :func:`filled_dashboard`:
    its name -> (its path, its h1, a text its data shows, or the id of a job it links to)."""
    return {
        "overview": ("/solidq/", "Queues", "worker-1"),
        "queue": ("/solidq/queue/default", "Queue default", "Time (UTC)"),
        **{
            f"jobs-{state}": (f"/solidq/jobs?state={state}", f"{state.capitalize()} jobs", job_id)
            for state, job_id in ids.items()
        },
        "job": (f"/solidq/jobs/{ids['failed']}", f"Job {ids['failed']}", "Traceback"),
        "budgets": ("/solidq/budgets", "Rate-limit budgets", "rate_test.global/global"),
        "coalescing": ("/solidq/coalescing", "Coalescing", "coalesce_test.collect/acct-5"),
        "concurrency": (
            "/solidq/concurrency",
            "Concurrency keys",
            "concurrency_test.limited/acct-7",
        ),
        "processes": ("/solidq/processes", "Processes", "worker-1"),
        "recurring": ("/solidq/recurring", "Recurring tasks", "nightly_cleanup"),
        "batches": ("/solidq/batches", "Batches", batch_id),
        "batch": (f"/solidq/batches/{batch_id}", f"Batch {batch_id} failed", "nightly export"),
    }


def test_every_dashboard_page_loads_with_its_data_and_is_saved_as_a_screenshot(
    dashboard_app, engine, database_url, page
):
    from playwright.sync_api import expect

    batch_id, _ = batch_of_two(dashboard_app, engine)  # runs every ready job: first
    ids = filled_dashboard(dashboard_app, engine)
    backend = sa.make_url(database_url).get_backend_name()
    folder = ARTIFACTS / backend
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):  # a page renamed since the last run left its picture
        old.unlink()
    pages = every_page(batch_id, ids)

    for name, (path, heading, shown) in pages.items():
        response = page.goto(path)
        assert response is not None and response.status == 200, (name, path)
        expect(page.get_by_role("heading", level=1, name=heading)).to_be_visible()
        if isinstance(shown, int):
            expect(page.get_by_role("link", name=str(shown), exact=True)).to_be_visible()
        else:
            expect(page.locator("main")).to_contain_text(shown)
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)

    saved = sorted(path.stem for path in folder.glob("*.png"))
    assert saved == sorted(pages)


def batch_of_two(app: Flask, engine: sa.Engine) -> tuple[int, dict[str, int]]:
    """A finished batch: one job that failed, one that finished; its id and its jobs' ids."""
    jobs.FAILURES["batch-broken"] = ValueError
    with app.app_context():
        with solidq.batch(label="nightly export") as batch:
            failed = jobs.task.perform_later("batch-broken").provider_job_id
            finished = jobs.task.perform_later("batch-done").provider_job_id
    while claimed := claim(engine, 5):
        finish(engine, perform(app, claimed))
    return batch.id, {"failed": t.cast(int, failed), "finished": t.cast(int, finished)}


def test_the_batches_pages_in_a_browser_link_a_batch_its_jobs_and_back(dashboard_app, engine, page):
    from playwright.sync_api import expect

    batch_id, ids = batch_of_two(dashboard_app, engine)
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text))

    page.goto("/solidq/")
    page.get_by_role("link", name="Batches", exact=True).click()
    expect(page.get_by_role("heading", level=1, name="Batches")).to_be_visible()
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=str(batch_id)))
    expect(row).to_contain_text("nightly export")
    expect(row).to_contain_text("1/1/0 of 2")
    # The bar's halves are drawn at their widths, from the stylesheet (no inline style).
    completed = row.locator("svg.progress rect.completed").bounding_box()
    failed = row.locator("svg.progress rect.failed").bounding_box()
    assert completed is not None and failed is not None
    assert completed["width"] > 10 and abs(completed["width"] - failed["width"]) < 1
    fill = row.locator("svg.progress rect.failed").evaluate("rect => getComputedStyle(rect).fill")
    assert fill == "rgb(204, 51, 51)"

    row.get_by_role("link", name=str(batch_id), exact=True).click()
    expect(page.get_by_role("heading", level=1, name=f"Batch {batch_id} failed")).to_be_visible()
    page.locator("#jobs-failed").get_by_role("link", name=str(ids["failed"])).click()
    expect(page.get_by_role("heading", name=f"Job {ids['failed']}")).to_be_visible()
    page.get_by_role("link", name=f"Batch {batch_id}", exact=True).click()
    expect(page.get_by_role("heading", level=1, name=f"Batch {batch_id} failed")).to_be_visible()
    expect(page.locator("#jobs-finished")).to_contain_text(str(ids["finished"]))
    assert not [text for text in refused if "Content Security Policy" in text], refused


#: Whether a table's box on the page is scrolled sideways: its table is wider than it.
SCROLLS_INSIDE = (
    "[...document.querySelectorAll('.scroll')].some(box => box.scrollWidth > box.clientWidth)"
)


def test_no_dashboard_page_is_wider_than_the_window_on_a_laptop(dashboard_app, engine, page):
    """At 1200 px (a laptop) no page scrolls sideways, and no table in its box either: the
    nav wraps. A phone's window is test_dashboard_phone_browser.py's."""
    from playwright.sync_api import expect

    width = 1200
    batch_id, _ = batch_of_two(dashboard_app, engine)
    ids = filled_dashboard(dashboard_app, engine)
    page.set_viewport_size({"width": width, "height": 800})
    overflowing: dict[str, tuple[int, int]] = {}
    scrolled: list[str] = []
    for name, (path, heading, _shown) in every_page(batch_id, ids).items():
        response = page.goto(path)
        assert response is not None and response.status == 200, (name, path)
        expect(page.get_by_role("heading", level=1, name=heading)).to_be_visible()
        scroll_width, window_width = page.evaluate(
            "[document.documentElement.scrollWidth, window.innerWidth]"
        )
        if scroll_width > window_width:
            overflowing[name] = (scroll_width, window_width)
        # Every table is in its scrolling box; note the pages where one scrolls in it.
        assert page.locator("table:not(.scroll > table)").count() == 0, name
        if page.evaluate(SCROLLS_INSIDE):
            scrolled.append(name)
    assert overflowing == {}
    assert not scrolled
    # Every link of the nav is on screen, the last one too (wrapped, not cut off).
    nav = page.locator("header a").last
    box = nav.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width
