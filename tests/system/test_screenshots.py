"""Every dashboard screen has a documentation page with its picture, and the pictures are taken
by a real browser from the seeded demo (``python -m example_app.screenshots``, here into a
scratch folder: the committed ones are retaken by hand when a page changes)."""

from __future__ import annotations

import os
import pathlib
import shutil
import struct
import sys

import pytest

from example_app import screenshots
from example_app.app import create_app
from tests.support import processes

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: The dashboard's GET endpoints that are not screens: its files and the Prometheus metrics.
NOT_SCREENS = {"static", "metrics"}


def screen_endpoints() -> set[str]:
    app = create_app({"SQLALCHEMY_DATABASE_URI": "sqlite://"})
    return {
        rule.endpoint.split(".", 1)[1]
        for rule in app.url_map.iter_rules()
        if rule.endpoint.startswith("solidq_dashboard.") and "GET" in (rule.methods or ())
    } - NOT_SCREENS


def test_every_dashboard_screen_is_photographed_and_has_a_docs_page_with_its_picture():
    screens = screen_endpoints()
    assert set(screenshots.SCREENS) == screens
    index = (DOCS / "dashboard.md").read_text(encoding="utf-8")
    for name in sorted(screens):
        page = DOCS / "dashboard" / f"{name}.md"
        assert page.is_file(), f"no docs page for the dashboard's {name} screen"
        assert f"]({name}.png)" in page.read_text(encoding="utf-8"), page
        assert (DOCS / "dashboard" / f"{name}.png").is_file(), name
        assert f"\ndashboard/{name}\n" in index, f"dashboard.md's contents miss {name}"


def png_size(path: pathlib.Path) -> tuple[int, int]:
    """A PNG's width and height, from its header."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", header[16:24])


@pytest.mark.processes
def test_the_pictures_are_taken_of_every_screen_by_a_browser_from_the_seeded_demo(tmp_path):
    if shutil.which(screenshots.CHROMIUM) is None:
        if os.environ.get("SOLIDQ_REQUIRE_ALL_BACKENDS"):
            pytest.fail(f"no Chromium at {screenshots.CHROMIUM}: CI installs it (.ci/run)")
        pytest.skip(f"no Chromium at {screenshots.CHROMIUM} (apt-get install chromium)")
    command = [sys.executable, "-m", "example_app.screenshots", "--out", str(tmp_path)]
    result = processes.run(
        [*command, "--settle", "0"], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for name in screenshots.SCREENS:
        width, height = png_size(tmp_path / f"{name}.png")
        assert width == screenshots.WIDTH and 0 < height <= screenshots.MAX_HEIGHT, name
