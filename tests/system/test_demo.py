"""``make demo``: the example app's server and worker, as real processes on a real port."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import sqlite3
import subprocess
import sys
import typing as t
import urllib.error
import urllib.request

import pytest

from example_app.app import HTMX_SCRIPT
from tests.support import processes
from tests.support import wait_until
from tests.support.processes import processes_with

pytestmark = pytest.mark.processes

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Demo(t.NamedTuple):
    """A demo process, and the environment entry only it and its children carry."""

    process: subprocess.Popen[str]
    marker: bytes
    port: int


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return t.cast(int, probe.getsockname()[1])


def demo_command(port: int, *options: str) -> list[str]:
    return [sys.executable, "-m", "example_app.demo", "--port", str(port), *options]


def demo_environment(tmp_path: pathlib.Path) -> tuple[dict[str, str], bytes]:
    """The demo's environment: its own SQLite database, whose URL also marks its processes."""
    url = f"sqlite:///{tmp_path}/demo.db"
    return {**os.environ, "DATABASE_URL": url}, f"DATABASE_URL={url}".encode()


def children_of(pid: int, marker: bytes) -> list[int]:
    children = []
    for child in processes_with(marker):
        try:
            stat = pathlib.Path(f"/proc/{child}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid:
            children.append(child)
    return children


def get(port: int, path: str = "/", headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, response.read().decode()


def page_or_none(port: int) -> str | None:
    """The page, or None while the demo isn't serving yet: its port listens from the start, so
    a request may wait in its backlog, past the read's timeout, while it migrates and seeds."""
    try:
        return get(port)[1]
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


@contextlib.contextmanager
def serving_demo(tmp_path: pathlib.Path, *options: str, **popen_options: t.Any) -> t.Iterator[Demo]:
    """The demo (given ``options``) serving on a free port, once its page answers; killed with
    its processes if the caller leaves it running. (Its environment's ``DATABASE_URL`` marks
    the demo, its migration, its worker's supervisor and the supervisor's children.)"""
    port = free_port()
    environment, marker = demo_environment(tmp_path)
    process = processes.start(
        demo_command(port, *options),
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen_options,
    )
    try:
        wait_until(
            lambda: page_or_none(port) or process.poll() is not None, timeout=60, interval=0.2
        )
        assert process.poll() is None, process.communicate()[0]
        yield Demo(process, marker, port)
    finally:
        processes.end(process)


@pytest.fixture
def demo(tmp_path: pathlib.Path) -> t.Iterator[Demo]:
    with serving_demo(tmp_path) as demo:
        yield demo


def test_a_port_in_use_says_so_in_one_line_and_exits_non_zero_with_nothing_left_running(
    tmp_path,
):
    environment, marker = demo_environment(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = processes.run(
            demo_command(port),
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"Port {port} is in use on 127.0.0.1: stop what uses it, or pick another port"
        f" (make demo PORT={port + 1})."
    ]
    assert processes_with(marker) == []
    assert not (tmp_path / "demo.db").exists()  # the port is taken before anything starts


def test_the_demo_serves_on_its_port_runs_jobs_and_ctrl_c_stops_its_worker(demo):
    page = get(demo.port)[1]
    assert 'hx-trigger="every 2s"' in page
    assert get(demo.port, f"/solidq-static/{HTMX_SCRIPT}")[0] == 200
    wait_until(lambda: len(children_of(demo.process.pid, demo.marker)) == 1, timeout=30)

    request = urllib.request.Request(
        f"http://127.0.0.1:{demo.port}/products", data=b"name=Teapot", method="POST"
    )
    urllib.request.urlopen(request, timeout=5).close()
    # The worker reindexes the product; the page's poll shows it.
    wait_until(
        lambda: "<strong>1</strong> finished" in get(demo.port, "/", {"HX-Request": "true"})[1],
        timeout=30,
        interval=0.2,
    )

    demo.process.send_signal(signal.SIGINT)
    output = demo.process.communicate(timeout=60)[0]

    assert demo.process.returncode == 0, output
    assert processes_with(demo.marker) == []
    # The fixture's first look, this test's and the POST's redirect; the polls aren't logged.
    assert output.count('"GET / HTTP/1.1" 200') == 3, output


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_kill_or_a_closed_terminal_stops_the_demo_and_its_worker(demo, signum):
    wait_until(lambda: len(children_of(demo.process.pid, demo.marker)) == 1, timeout=30)

    demo.process.send_signal(signum)
    output = demo.process.communicate(timeout=60)[0]

    assert demo.process.returncode == 0, output
    assert processes_with(demo.marker) == []


def test_a_worker_that_stops_by_itself_stops_the_demo_with_a_non_zero_exit(demo):
    (worker,) = wait_until(lambda: children_of(demo.process.pid, demo.marker), timeout=30)

    os.kill(worker, signal.SIGTERM)  # a worker stopped from outside, or one that crashed
    output = demo.process.communicate(timeout=60)[0]

    assert demo.process.returncode == 1
    assert "The worker stopped, so the demo stops too." in output
    assert processes_with(demo.marker) == []
    assert page_or_none(demo.port) is None


def test_make_demo_installs_only_the_package_and_passes_the_port():
    dry_run = processes.run(
        # --no-print-directory: under `make test` (CI) this make is nested and would print
        # its "Entering/Leaving directory" lines.
        ["make", "--no-print-directory", "--dry-run", "--always-make", "demo", "PORT=5001"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()

    installs = [line for line in dry_run if "pip install" in line and "--upgrade pip" not in line]
    assert installs == [".venv/bin/pip install --quiet -e ."]
    assert dry_run[-1] == ".venv/bin/python -m example_app.demo --port 5001"


def test_ctrl_c_stops_the_demo_even_when_it_inherits_sigint_ignored(tmp_path):
    """A demo started from a script or a CI job (a background job of a shell) inherits SIGINT
    ignored, and Python then raises no KeyboardInterrupt: the demo handles it itself."""
    ignore_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731
    with serving_demo(tmp_path, preexec_fn=ignore_sigint) as demo:
        wait_until(lambda: len(children_of(demo.process.pid, demo.marker)) == 1, timeout=30)

        demo.process.send_signal(signal.SIGINT)
        output = demo.process.communicate(timeout=60)[0]

        assert demo.process.returncode == 0, output
        assert processes_with(demo.marker) == []


def test_the_seeded_demo_shows_a_batch_that_completes_and_a_job_with_its_steps(tmp_path):
    """What a newcomer finds on the dashboard of a fresh ``make demo`` (which seeds its own
    database; this one's is a ``DATABASE_URL``, so ``--seed`` asks): the catalog import's batch
    and the search rebuild's steps, once the worker has run them."""

    def scalar(query: str) -> t.Any:
        with contextlib.closing(sqlite3.connect(tmp_path / "demo.db")) as connection:
            return connection.execute(query).fetchone()[0]

    with serving_demo(tmp_path, "--seed") as demo:
        assert scalar("SELECT count(*) FROM solidq_batches WHERE finished_at IS NULL") == 1
        rebuild = scalar("SELECT id FROM solidq_jobs WHERE class_name = 'RebuildSearchIndex'")

        # The worker imports the suppliers, reindexes, publishes the catalog and rebuilds.
        published = "SELECT count(*) FROM solidq_jobs WHERE class_name = 'publish_catalog'"
        finished = f"SELECT finished_at FROM solidq_jobs WHERE id = {rebuild}"
        wait_until(lambda: scalar(published) and scalar(finished), timeout=60, interval=0.5)
        assert scalar("SELECT count(*) FROM solidq_batches WHERE finished_at IS NULL") == 0
        assert "catalog import" in get(demo.port, "/solidq/batches")[1]
        page = get(demo.port, f"/solidq/jobs/{rebuild}")[1]
        assert "<dt>Steps</dt>" in page
        assert "<li>clear: " in page
        assert "<li>index: " in page

        demo.process.send_signal(signal.SIGINT)
        output = demo.process.communicate(timeout=60)[0]

    assert demo.process.returncode == 0, output
    assert "3 supplier imports in a batch, 1 search rebuild in steps" in output
