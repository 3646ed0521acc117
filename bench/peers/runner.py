"""Draining a backlog with a peer's worker processes, the same way for every peer.

The worker processes start (each in a session of its own, output to a log file), the benchmark
watches the stamp file until it holds a stamp per job, then stops them with the peer's graceful
signal and, whatever happened, kills what is left of their process groups. The rate comes from
the jobs' own start stamps, so the processes' boot and stop aren't counted.

A drain may be given a budget: seconds from its first job's start after which it is stopped
with the backlog not yet drained. Its rate is then that of the jobs that started meanwhile (a
queue that runs 25 jobs a second is measured as well over 10 s as over 40 s), and its check
only covers them: none started twice. That keeps a comparison with slow queues in a few minutes
without making the backlog of fast ones too small to time.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import signal
import subprocess
import time

from bench.peers import ROOT
from bench.peers import Layout
from bench.peers import Peer
from bench.peers import Scratch
from bench.peers import stamps

#: Seconds the workers get to exit after the graceful signal.
STOP_TIMEOUT = 30.0
POLL = 0.1


@dataclasses.dataclass
class Drain:
    """One drain's outcome."""

    rate: float | None
    check: str
    problems: list[str]
    #: Stamps read (jobs started, counting any that started twice).
    started: int = 0
    #: Stopped by the budget before every job started.
    partial: bool = False


def drain(
    peer: Peer,
    scratch: Scratch,
    layout: Layout,
    count: int,
    workdir: pathlib.Path,
    *,
    timeout: float,
    stall: float,
    budget: float | None = None,
) -> Drain:
    """Start ``layout``'s worker processes on ``scratch``, wait until ``count`` jobs started
    (or ``budget`` seconds passed since the first did, or the drain stalls or times out), stop
    them, and read the stamps."""
    path = workdir / "stamps.txt"
    path.unlink(missing_ok=True)
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PYTHONUNBUFFERED": "1",
        stamps.VARIABLE: str(path),
        **peer.environment(scratch),
    }
    log_path = workdir / "worker.log"
    processes: list[subprocess.Popen[bytes]] = []
    problems: list[str] = []
    with log_path.open("wb") as log:
        try:
            for command in peer.commands(scratch, layout):
                processes.append(
                    subprocess.Popen(
                        command,
                        cwd=ROOT,
                        env=environment,
                        stdout=log,
                        stderr=log,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
            problems += _wait(path, count, processes, timeout=timeout, stall=stall, budget=budget)
            problems += _stop(processes, peer.stop_signal)
        finally:
            for process in processes:
                _kill(process)
    entries = stamps.read(path)
    if problems:
        problems += _tail(log_path)
    partial = not problems and len({index for index, _ in entries}) < count
    check = stamps.check(entries, count, complete=not partial)
    return Drain(stamps.rate(entries), check, problems, len(entries), partial)


def _wait(
    path: pathlib.Path,
    count: int,
    processes: list[subprocess.Popen[bytes]],
    *,
    timeout: float,
    stall: float,
    budget: float | None,
) -> list[str]:
    """Wait for ``count`` stamps, or ``budget`` seconds after the first; a line saying why not,
    if the workers exited, stopped making progress for ``stall`` seconds, or took longer than
    ``timeout`` in all."""
    started = last_progress = time.monotonic()
    first_start: float | None = None
    seen = 0
    while True:
        done = stamps.count(path)
        if done >= count:
            return []
        now = time.monotonic()
        if done and first_start is None:
            first_start = now
        if budget and first_start is not None and now - first_start > budget:
            return []
        if done != seen:
            seen, last_progress = done, now
        exited = [process for process in processes if process.poll() is not None]
        if exited:
            codes = ", ".join(str(process.returncode) for process in exited)
            return [f"a worker process exited early (status {codes}); {done} of {count} started"]
        if now - last_progress > stall:
            return [f"drain stalled: {done} of {count} started, none in the last {stall:g} s"]
        if now - started > timeout:
            return [f"drain timed out after {timeout:g} s: {done} of {count} started"]
        time.sleep(POLL)


def _stop(processes: list[subprocess.Popen[bytes]], stop_signal: int) -> list[str]:
    """Send each process the graceful signal and wait for all of them to exit."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(stop_signal)
    deadline = time.monotonic() + STOP_TIMEOUT
    problems = []
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            name = signal.Signals(stop_signal).name
            problems.append(f"a worker didn't exit within {STOP_TIMEOUT:.0f} s of {name}; killed")
    return problems


def _kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL what is left of the process's group (its children too), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _tail(log_path: pathlib.Path, lines: int = 5) -> list[str]:
    """The last lines of the workers' output, to say why a drain went wrong."""
    text = log_path.read_text(errors="replace").splitlines() if log_path.exists() else []
    return [f"  worker log: {line[:200]}" for line in text[-lines:]]
