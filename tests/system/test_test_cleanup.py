"""However a pytest session of this suite ends, the processes its tests started end with it:
at the end of a passing or a failing test, on Ctrl-C (SIGINT to pytest's process group), on
SIGTERM to pytest or to pytest and its xdist workers, and when pytest is SIGKILLed.

Each case runs ``cleanup_session.py`` in a pytest of its own, on SQLite, whose tests start a
``flask solidq work`` (a supervisor and the workers and dispatcher it forks) and a server
through the suite's fixtures; once they run, the case ends that pytest its way and waits for
every one of them to be gone. They are found by an entry only their environment carries, and
by the pids the inner tests reported.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import typing as t
import uuid

import pytest

from tests import support
from tests.support import processes
from tests.support import wait_until

F = t.TypeVar("F", bound=t.Callable[..., t.Any])


def inner_session(test: F) -> F:
    """The marks of a test that runs an inner session."""
    skip = pytest.mark.skipif(not processes.LINUX, reason="finds processes in /proc")
    return pytest.mark.processes(pytest.mark.slow(skip(test)))


ROOT = pathlib.Path(__file__).resolve().parents[2]
SESSION = "tests/system/cleanup_session.py"

#: How long the inner pytest may take to start its processes, or to run to its end.
RUN_TIMEOUT = 60.0
#: How long, once the inner pytest has ended, its processes may take to be gone.
GONE_TIMEOUT = 10.0


class Inner(t.NamedTuple):
    """The inner pytest, the entry its processes' environment carries, and its report."""

    process: subprocess.Popen[bytes]
    check: bytes
    report: pathlib.Path
    log: pathlib.Path

    def started(self) -> list[tuple[int, int]]:
        """The (pid, start time) of every process the inner tests reported."""
        lines = self.report.read_text().splitlines() if self.report.exists() else []
        return [(pid, start) for line in lines for pid, start in json.loads(line)]

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def interrupt_group(inner: Inner) -> None:
    """Ctrl-C: SIGINT to the foreground process group, pytest's (its xdist workers too)."""
    os.killpg(inner.process.pid, signal.SIGINT)


def terminate(inner: Inner) -> None:
    inner.process.send_signal(signal.SIGTERM)


def terminate_group(inner: Inner) -> None:
    """SIGTERM to pytest and its xdist workers."""
    os.killpg(inner.process.pid, signal.SIGTERM)


def kill(inner: Inner) -> None:
    inner.process.kill()


@pytest.fixture
def start_inner(tmp_path: pathlib.Path) -> t.Iterator[t.Callable[..., Inner]]:
    """Start the inner pytest on ``SESSION``'s tests matching ``selection``, with
    ``options``; it is ended (and its processes, however this test ends) afterwards."""
    started: list[Inner] = []

    def start(selection: str, *options: str) -> Inner:
        check = f"SOLIDQ_TEST_CLEANUP_CHECK={uuid.uuid4().hex}"
        report, log = tmp_path / "report.jsonl", tmp_path / "pytest.log"
        with log.open("wb") as output:
            process = processes.start(
                [sys.executable, "-m", "pytest", SESSION, "-q", "-k", selection, *options],
                cwd=ROOT,
                env={
                    **_sqlite_only(os.environ),
                    "SOLIDQ_TEST_CLEANUP_REPORT": str(report),
                    **dict([check.split("=", 1)]),
                },
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        inner = Inner(process, check.encode(), report, log)
        started.append(inner)
        return inner

    yield start
    for inner in started:
        processes.end(inner.process)


def _sqlite_only(environ: t.Mapping[str, str]) -> dict[str, str]:
    """This environment without the other backends' URLs, nor this pytest's xdist worker's
    entries (the inner pytest is a session of its own)."""
    dropped = {*support.BACKEND_URLS.values(), "SOLIDQ_REQUIRE_ALL_BACKENDS"}
    return {
        name: value
        for name, value in environ.items()
        if name not in dropped and not name.startswith("PYTEST_")
    }


def running(pid: int, start: int) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (a zombie doesn't)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] != "Z" and int(fields[19]) == start


def leftovers(inner: Inner) -> list[str]:
    """The inner session's processes still running, by their command lines."""
    pids = set(processes.processes_with(inner.check))
    pids.update(pid for pid, start in inner.started() if running(pid, start))
    return [f"{pid}: {_command_line(pid)}" for pid in sorted(pids)]


def _command_line(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "(gone)"


def assert_all_gone(inner: Inner) -> None:
    try:
        wait_until(lambda: not leftovers(inner), timeout=GONE_TIMEOUT, interval=0.1)
    except AssertionError:
        raise AssertionError(f"left running: {leftovers(inner)}\n{inner.output()}") from None


@inner_session
def test_the_processes_of_a_passing_and_a_failing_test_end_with_them(start_inner):
    inner = start_inner("passes or fails", "-p", "no:xdist")

    assert inner.process.wait(RUN_TIMEOUT) == 1, inner.output()

    assert len(inner.started()) == 2 * 6, inner.output()  # pytest, supervisor, 3 forked, server
    assert "1 failed, 1 passed" in inner.output()
    assert_all_gone(inner)


@inner_session
@pytest.mark.parametrize(
    ("stop", "options", "status"),
    [
        (interrupt_group, ("-p", "no:xdist"), pytest.ExitCode.INTERRUPTED),
        (interrupt_group, ("-n", "1"), pytest.ExitCode.INTERRUPTED),
        (terminate, ("-p", "no:xdist"), -signal.SIGTERM),
        (terminate_group, ("-n", "1"), -signal.SIGTERM),
        (kill, ("-p", "no:xdist"), -signal.SIGKILL),
        (kill, ("-n", "1"), -signal.SIGKILL),
    ],
    ids=["SIGINT", "SIGINT-xdist", "SIGTERM", "SIGTERM-xdist", "SIGKILL", "SIGKILL-xdist"],
)
def test_the_processes_of_a_stopped_session_end_with_it(start_inner, stop, options, status):
    inner = start_inner("waits_to_be_stopped", *options)
    wait_until(
        lambda: inner.started() or inner.process.poll() is not None,
        timeout=RUN_TIMEOUT,
        interval=0.1,
    )
    started = inner.started()
    assert len(started) == 6, inner.output()  # pytest, the supervisor, 3 forked, the server
    assert all(running(pid, start) for pid, start in started), inner.output()

    stop(inner)

    assert inner.process.wait(RUN_TIMEOUT) == status, inner.output()
    assert_all_gone(inner)


#: The modules that may call ``subprocess`` themselves: the one place, and the network
#: namespace's ``ip`` commands, which end at once.
SUBPROCESS_ALLOWED = {"tests/support/processes.py", "tests/support/netns.py"}


def test_no_test_starts_a_process_but_through_the_support_module():
    calls = re.compile(r"\bsubprocess\.(Popen|run|call|check_call|check_output)\(")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if str(path.relative_to(ROOT)) not in SUBPROCESS_ALLOWED
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if calls.search(line)
    ]
    assert found == [], "start processes with tests.support.processes.start or .run"
