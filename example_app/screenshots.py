"""Take the README's dashboard screenshots, docs/dashboard-overview.png and
docs/dashboard-budgets.png, from a freshly seeded demo::

    .venv/bin/python -m example_app.screenshots            # from the repository's top folder

It runs the demo (``python -m example_app.demo --seed``) on a free port with a database in a
temporary folder and lets its worker run for ``--settle`` seconds (10 by default: most seeded
jobs have finished or failed by then, while a sales report is still being rebuilt with the next
one blocked behind it, and most partner notifications are deferred by their rate limit). Then
it saves the pages with headless Chromium (Debian's ``/usr/bin/chromium``, driven by
Playwright: ``pip install -e '.[test]'``), 1280 px wide, and stops the demo. A demo that
exited, or whose worker finished no job, stops it with the demo's log instead.
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
#: The browser window: pages are saved whole, so the height is only where they start.
WIDTH, HEIGHT = 1280, 800
#: docs/<file> -> the dashboard page it shows.
PAGES = {
    "dashboard-overview.png": "/solidq/",
    "dashboard-budgets.png": "/solidq/budgets",
}
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
            time.sleep(options.settle)  # the worker runs the seeded jobs meanwhile
            demo.check()
            for path in _capture(demo.base_url, options.out):
                print(f"{path} ({path.stat().st_size // 1024} KB)")
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m example_app.screenshots", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--settle", type=float, default=10.0, help="seconds the worker runs first (default 10)"
    )
    parser.add_argument(
        "--out", type=pathlib.Path, default=ROOT / "docs", help="folder (default: docs/)"
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

    def check(self) -> None:
        """Stop with the demo's log unless it still serves and its worker has finished jobs:
        pictures of a stopped demo, or of a worker that fails to claim, would mislead."""
        if self.process.poll() is not None:
            self.fail(f"The demo exited ({self.process.returncode}).")
        with contextlib.closing(sqlite3.connect(self.database)) as connection:
            (finished,) = connection.execute(FINISHED_JOBS).fetchone()
        if not finished:
            self.fail("The demo's worker finished no job.")

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
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
            continue
        if demo.process.poll() is None:  # not another server that took the port first
            return
    demo.fail(f"The demo didn't answer on {demo.base_url} within {START_TIMEOUT} s.")


def _capture(base_url: str, out: pathlib.Path) -> list[pathlib.Path]:
    """Save each of PAGES, the whole page, at 1280 px wide."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise SystemExit("Playwright is not installed: pip install -e '.[test]'") from None
    saved = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(base_url=base_url, viewport={"width": WIDTH, "height": HEIGHT})
            for name, path in PAGES.items():
                response = page.goto(path)
                if response is None or response.status != 200:
                    raise SystemExit(f"{path} answered {response and response.status}.")
                page.locator("h1").wait_for()
                saved.append(out / name)
                page.screenshot(path=str(saved[-1]), full_page=True)
        finally:
            browser.close()
    return saved


if __name__ == "__main__":
    sys.exit(main())
