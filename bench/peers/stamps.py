"""The job every peer runs: it notes when it started, cheaply and outside any queue's store.

Each job appends one line, ``"<index> <time.time()>"``, to the file named by
``SOLIDQ_COMPARE_STAMPS`` with a single ``write`` to a descriptor opened ``O_APPEND`` once per
process: lines of concurrent threads and processes never interleave, and the cost (a few
microseconds) is the same for every peer. The benchmark reads the file to time the drain (first
to last start) and to check that every index ran exactly once.
"""

from __future__ import annotations

import collections
import os
import pathlib
import threading
import time

VARIABLE = "SOLIDQ_COMPARE_STAMPS"

_descriptors: dict[int, int] = {}
_lock = threading.Lock()


def stamp(index: int) -> None:
    """Record that job ``index`` started now."""
    started = time.time()
    os.write(_descriptor(), f"{int(index)} {started!r}\n".encode())


def _descriptor() -> int:
    """This process's descriptor of the stamp file (keyed by pid: a forked child, such as an
    RQ work horse, opens its own)."""
    pid = os.getpid()
    descriptor = _descriptors.get(pid)
    if descriptor is None:
        with _lock:
            descriptor = _descriptors.get(pid)
            if descriptor is None:
                flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
                descriptor = os.open(os.environ[VARIABLE], flags, 0o644)
                _descriptors[pid] = descriptor
    return descriptor


def count(path: pathlib.Path) -> int:
    """How many stamps the file holds so far (complete lines)."""
    try:
        with path.open("rb") as file:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 16), b""))
    except FileNotFoundError:
        return 0


def read(path: pathlib.Path) -> list[tuple[int, float]]:
    """Every complete stamp in the file: (job index, start time)."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        index, _, started = line.partition(" ")
        if started:
            entries.append((int(index), float(started)))
    return entries


def check(entries: list[tuple[int, float]], expected: int, *, complete: bool = True) -> str:
    """What went wrong, or "ok": every index below ``expected`` ran exactly once (when not
    ``complete``, a drain stopped early: none of those that started ran twice)."""
    seen = collections.Counter(index for index, _ in entries)
    missing = expected - sum(1 for index in seen if 0 <= index < expected)
    twice = sorted(index for index, times in seen.items() if times > 1)
    strays = sorted(index for index in seen if not 0 <= index < expected)
    issues = []
    if missing and complete:
        issues.append(f"{missing} of {expected} jobs never started")
    if twice:
        issues.append(f"{len(twice)} jobs started more than once (e.g. {twice[:5]})")
    if strays:
        issues.append(f"{len(strays)} unknown job indexes")
    return "; ".join(issues) or "ok"


def rate(entries: list[tuple[int, float]]) -> float | None:
    """Jobs per second from the first start to the last: (stamps - 1) / (last - first)."""
    if len(entries) < 2:
        return None
    times = [started for _, started in entries]
    span = max(times) - min(times)
    return (len(entries) - 1) / span if span > 0 else None
