"""Take the dashboard's pictures for the documentation, one per screen, into docs/dashboard/
(``overview.png``, ``budgets.png``, ...: :data:`SCREENS`), from a freshly seeded demo::

    .venv/bin/python -m example_app.screenshots            # from the repository's top folder

It runs the demo (``python -m example_app.demo --seed``) on a free port with a database in a
temporary folder, waits for its worker's first finished job, and lets it run ``--settle``
seconds more (10 by default: most seeded jobs have finished or failed by then, while a sales
report is still being rebuilt with the next one blocked behind it, and most partner
notifications are deferred by their rate limit). Then
it saves each screen with headless Chromium (Debian's ``/usr/bin/chromium``, driven by
Playwright: ``pip install -e '.[test]'``), 1280 px wide and at most :data:`MAX_HEIGHT` tall,
and stops the demo. A demo that exited, or whose worker finished no job, stops it with the
demo's log instead. ``tests/system/test_screenshots.py`` runs it into a scratch folder.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import typing as t
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
#: The flags Chromium is launched with here and by tests/dashboard/test_dashboard_browser.py
#: (headless in a container, no connections to Google's services, which this machine's network
#: refuses).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: The browser window; a picture is the page from its top, down to MAX_HEIGHT at most.
WIDTH, HEIGHT = 1280, 800
MAX_HEIGHT = 1400
#: Each screen's picture (docs/dashboard/<name>.png) -> its path under the dashboard, where
#: ``{job}`` is the demo's search-index rebuild (a job with steps) and ``{batch}`` its catalog
#: import.
SCREENS = {
    "overview": "/",
    "queue": "/queue/partners",
    "stats": "/stats",
    "jobs": "/jobs?state=failed",
    "job": "/jobs/{job}",
    "batches": "/batches",
    "batch": "/batches/{batch}",
    "budgets": "/budgets",
    "coalescing": "/coalescing",
    "concurrency": "/concurrency",
    "recurring": "/recurring",
    "processes": "/processes",
}
#: The demo's jobs the pictures of one job and one batch show.
SHOWN_JOB = "SELECT min(id) FROM solidq_jobs WHERE class_name = 'RebuildSearchIndex'"
SHOWN_BATCH = "SELECT min(id) FROM solidq_batches"
#: How long the demo may take to answer its first request.
START_TIMEOUT = 60
#: How much of the demo's log a failure shows, in characters.
LOG_TAIL = 4000
FINISHED_JOBS = "SELECT count(*) FROM solidq_jobs WHERE finished_at IS NOT NULL"


def main(argv: list[str] | None = None) -> int:
    options = _parse(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="solidq-screenshots-") as folder:
        with _demo(pathlib.Path(folder), _free_port()) as demo:
            demo.wait_for_work()
            time.sleep(options.settle)  # the worker runs more of the seeded jobs meanwhile
            for path in _capture(demo.base_url, demo.paths(), options.out):
                print(f"{path} ({path.stat().st_size // 1024} KB)")
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m example_app.screenshots", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=10.0,
        help="seconds the worker runs after its first finished job (default 10)",
    )
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        default=ROOT / "docs" / "dashboard",
        help="folder (default: docs/dashboard/)",
    )
    return parser.parse_args(argv)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return t.cast(int, probe.getsockname()[1])


class Demo(t.NamedTuple):
    """The demo being photographed: its process, URL, database and log."""

    process: subprocess.Popen[bytes]
    base_url: str
    database: pathlib.Path
    log: pathlib.Path

    def wait_for_work(self) -> None:
        """Until the demo's worker has finished a job; stop with the demo's log if the demo
        exits first or none finishes within START_TIMEOUT: pictures of a stopped demo, or of
        a worker that fails to claim, would mislead."""
        deadline = time.monotonic() + START_TIMEOUT
        while not self._finished_any():
            if self.process.poll() is not None:
                self.fail(f"The demo exited ({self.process.returncode}).")
            if time.monotonic() > deadline:
                self.fail(f"The demo's worker finished no job within {START_TIMEOUT} s.")
            time.sleep(0.2)

    def _finished_any(self) -> bool:
        with contextlib.closing(sqlite3.connect(self.database)) as connection:
            (finished,) = connection.execute(FINISHED_JOBS).fetchone()
        return bool(finished)

    def paths(self) -> dict[str, str]:
        """Each of :data:`SCREENS`' paths, with the demo's job and batch put in."""
        with contextlib.closing(sqlite3.connect(self.database)) as connection:
            (job,) = connection.execute(SHOWN_JOB).fetchone()
            (batch,) = connection.execute(SHOWN_BATCH).fetchone()
        return {
            name: "/solidq" + path.format(job=job, batch=batch) for name, path in SCREENS.items()
        }

    def fail(self, reason: str) -> t.NoReturn:
        raise SystemExit(f"{reason} Its log:\n{self.log.read_text()[-LOG_TAIL:]}")


@contextlib.contextmanager
def _demo(folder: pathlib.Path, port: int) -> t.Iterator[Demo]:
    """The seeded demo serving on ``port`` with its database in ``folder``, once it answers.
    Stopped afterwards with TERM, which it takes as Ctrl-C (a Ctrl-C could be ignored: a
    shell's background job inherits SIGINT ignored), and which also stops its worker."""
    database = folder / "demo.db"
    environment = {**os.environ, "DATABASE_URL": f"sqlite:///{database}"}
    command = [sys.executable, "-m", "example_app.demo", "--port", str(port), "--seed"]
    log_path = folder / "demo.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=log, stderr=log)
        demo = Demo(process, f"http://127.0.0.1:{port}", database, log_path)
        try:
            _wait_for(demo)
            yield demo
        finally:
            process.terminate()
            process.wait(timeout=60)


def _wait_for(demo: Demo) -> None:
    """Until the demo's page answers; fail if the demo exits or START_TIMEOUT passes."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if demo.process.poll() is not None:
            demo.fail(f"The demo exited ({demo.process.returncode}) before it served a page.")
        try:
            urllib.request.urlopen(demo.base_url, timeout=5).close()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
            continue
        if demo.process.poll() is None:  # not another server that took the port first
            return
    demo.fail(f"The demo didn't answer on {demo.base_url} within {START_TIMEOUT} s.")


def _capture(base_url: str, paths: dict[str, str], out: pathlib.Path) -> list[pathlib.Path]:
    """Save each screen of ``paths`` (name -> path) as ``out/<name>.png``."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise SystemExit("Playwright is not installed: pip install -e '.[test]'") from None
    saved = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(base_url=base_url, viewport={"width": WIDTH, "height": HEIGHT})
            for name, path in paths.items():
                response = page.goto(path)
                if response is None or response.status != 200:
                    raise SystemExit(f"{path} answered {response and response.status}.")
                page.locator("h1").wait_for()
                height = min(page.evaluate("document.documentElement.scrollHeight"), MAX_HEIGHT)
                saved.append(out / f"{name}.png")
                clip = {"x": 0, "y": 0, "width": WIDTH, "height": height}
                page.screenshot(path=str(saved[-1]), full_page=True, clip=clip)
        finally:
            browser.close()
    return saved


if __name__ == "__main__":
    sys.exit(main())
