"""``rate_limiter.acquire`` from two real processes at once, on every backend: the window
bound holds across them, as it does across workers' claims.

Each process (:mod:`tests.scripts.acquire_many`) takes its admissions one after another from
``nb_test.processes`` (five in any second, two at once, then one every quarter second) and
notes each: the moment charged, by the database's clock, and when its block started. The
bound is checked exactly on the charged moments, and on the starts over windows shortened by
the little a block may start late (:data:`HANDOFF`).
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import typing as t

import pytest
import sqlalchemy as sa

from tests import support
from tests.jobs import named_budgets as jobs
from tests.support import processes
from tests.support.runtime import emptied_table

pytestmark = pytest.mark.processes

PROCESSES = 2
EACH = 8
TO, PER, BURST = 5, 1.0, 2
#: ``T = per / (to - burst + 1)``.
INTERVAL = PER / (TO - BURST + 1)
#: How much later than its admission a block may start: the caller sleeps out a charge
#: ahead (at most 0.25 s ahead, to the moment) and returns from ``acquire``, no query between.
HANDOFF = 0.2


def most_in_a_window(times: t.Sequence[dt.datetime], length: float) -> int:
    """The most of ``times`` any half-open window ``[x, x + length)`` holds."""
    ordered = sorted(times)
    window = dt.timedelta(seconds=length)
    return max(
        sum(1 for other in ordered[index:] if other < start + window)
        for index, start in enumerate(ordered)
    )


def too_close(times: t.Sequence[dt.datetime]) -> list[tuple[int, float]]:
    """Every run of ``m`` consecutive admissions spanning less than ``(m - burst) * T`` (GCRA
    never admits one; a thousandth of a microsecond covers float arithmetic)."""
    ordered = sorted(times)
    found = []
    for first in range(len(ordered)):
        for last in range(first + BURST, len(ordered)):
            span = (ordered[last] - ordered[first]) / dt.timedelta(microseconds=1)
            if span < (last - first + 1 - BURST) * INTERVAL * 1e6 - 1e-3:
                found.append((last - first + 1, span / 1e6))
    return found


@pytest.fixture
def acquisitions(app: t.Any, database_url: str) -> t.Iterator[sa.Table]:
    with emptied_table(database_url, jobs.ACQUISITIONS) as table:
        yield table


def test_two_processes_acquiring_at_once_keep_the_window_bound(
    app, engine, database_url, acquisitions, tmp_path
):
    go_file = tmp_path / "go"
    callers = [
        processes.start(
            [
                sys.executable,
                "-m",
                "tests.scripts.acquire_many",
                database_url,
                str(EACH),
                str(go_file),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for caller in callers:
            assert t.cast(t.IO[str], caller.stdout).readline().strip() == "ready", t.cast(
                t.IO[str], caller.stderr
            ).read()
        go_file.touch()
        outcomes = [caller.communicate(timeout=60) for caller in callers]
    finally:
        for caller in callers:
            processes.end(caller)

    for caller, (out, err) in zip(callers, outcomes, strict=True):
        assert caller.returncode == 0, err
        assert out.strip() == "done"
    found = support.rows(engine, acquisitions)
    assert len(found) == PROCESSES * EACH
    assert len({row.pid for row in found}) == PROCESSES
    admitted = [row.admitted_at for row in found]
    assert len(set(admitted)) == len(admitted)
    assert most_in_a_window(admitted, PER) <= TO, sorted(admitted)
    assert too_close(admitted) == []
    # Both took part while the budget was spent: each was admitted after waiting on the other.
    by_pid: dict[int, list[dt.datetime]] = {}
    for row in found:
        by_pid.setdefault(row.pid, []).append(row.admitted_at)
    first, last = min(admitted), max(admitted)
    assert all(min(times) < last and max(times) > first for times in by_pid.values())
    # A block starts at or after the moment it was charged, and the starts keep the bound.
    assert all(row.started_at >= row.admitted_at for row in found)
    assert most_in_a_window([row.started_at for row in found], PER - HANDOFF) <= TO
    # Sixteen admissions, two at once then one a quarter second: at least 3.5 s in all.
    assert (last - first) >= dt.timedelta(seconds=(PROCESSES * EACH - BURST) * INTERVAL)
