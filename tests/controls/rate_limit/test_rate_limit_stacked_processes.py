"""Stacked limits (``limits_rate(name=)``) and limits counted in units (``cost=``) in real
`flask solidq work --processes 2` processes, on every backend.

The workers, the evidence table and the checks are those of
:mod:`tests.controls.rate_limit.test_rate_limit_processes`: each run records its admission (its
claim row's ``created_at``, the moment the claim charged its budgets) and its start. Here:

* a job under a per-second limit and a (scaled-down) per-minute limit on the same key, with
  seeded random arrivals: *each* limit's window bound and spacing hold on the admissions,
  since every budget of a claim is charged at the same moment;
* a job whose calls cost 1 to ``burst`` units, from a seed: the units admitted in any
  half-open window of ``per`` add up to ``to`` at most, and any run of admissions of ``U``
  units spans at least ``(U - burst) * T``.

Nothing here depends on the backend: the lead runs the same file on PostgreSQL and MariaDB.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.models.tables import BUDGETS
from tests.controls.rate_limit import test_rate_limit_processes as processes
from tests.controls.rate_limit.test_rate_limit_processes import Run
from tests.controls.rate_limit.test_rate_limit_processes import check_guarantee
from tests.controls.rate_limit.test_rate_limit_processes import enqueue_all
from tests.controls.rate_limit.test_rate_limit_processes import most_in_a_window
from tests.controls.rate_limit.test_rate_limit_processes import too_close
from tests.controls.rate_limit.test_rate_limit_processes import wait_for_runs
from tests.jobs import rate_limit_stacked_process as jobs
from tests.jobs.rate_limit_process import Limit

if t.TYPE_CHECKING:
    from flask import Flask

pytestmark = pytest.mark.processes

#: The neighbours' fixture: `flask solidq work --processes 2` on the rate-limit app.
workers = processes.workers


@dataclasses.dataclass(frozen=True)
class Arrival:
    """Jobs enqueued at once (one transaction), ``at`` seconds into the test; each job's
    arguments."""

    at: float
    arguments: list[tuple[t.Any, ...]]


def spread(rng: random.Random, arguments: list[tuple[t.Any, ...]], span: float) -> list[Arrival]:
    """``arguments`` cut into single jobs and bursts (up to 6 at once) at random times over
    ``span`` seconds, the first at 0 and the last at ``span``."""
    sizes: list[int] = []
    while sum(sizes) < len(arguments):
        size = 1 if rng.random() < 0.5 else rng.randint(2, 6)
        # The first arrival leaves at least one job for the last, which comes at ``span``.
        room = len(arguments) - sum(sizes) - (0 if sizes else 1)
        sizes.append(min(size, room))
    times = [0.0, *sorted(rng.uniform(0, span) for _ in sizes[2:]), span]
    arrivals, start = [], 0
    for at, size in zip(times, sizes, strict=True):
        arrivals.append(Arrival(round(at, 3), arguments[start : start + size]))
        start += size
    return arrivals


def arrive(app: Flask, definition: t.Any, arrivals: list[Arrival]) -> list[int]:
    """Enqueue each arrival at its planned time; return every job id."""
    job_ids: list[int] = []
    began = time.monotonic()
    for arrival in arrivals:
        # The arrivals are the scenario: each comes at its planned time.
        time.sleep(max(0.0, began + arrival.at - time.monotonic()))
        job_ids += enqueue_all(app, definition, arrival.arguments)
    return job_ids


def budget_keys(engine: sa.Engine, prefix: str) -> list[str]:
    with engine.connect() as connection:
        found = connection.scalars(
            sa.select(BUDGETS.c.key).where(BUDGETS.c.key.startswith(prefix)).order_by("key")
        )
        return list(found)


# Stacked limits: per second and per "minute" on the same key.

STACKED_SEEDS = [1, 7]


def draw_stacked(seed: int) -> list[Arrival]:
    """A few more jobs than the longer window admits (10 to 12 against 8 per 3 s), over 1 to
    3 seconds: the per-second limit spaces the first ones, the per-minute one the rest."""
    rng = random.Random(seed)
    count = jobs.PER_MINUTE.to + rng.randint(2, 4)
    return spread(rng, [(value,) for value in range(count)], rng.uniform(1.0, 3.0))


@pytest.mark.parametrize("seed", STACKED_SEEDS)
def test_stacked_limits_each_keep_their_window_bound_across_two_worker_processes(
    app, workers, seed
):
    arrivals = draw_stacked(seed)
    job_name = "stacked_process_test.stacked"
    work = workers.start()
    job_ids = arrive(app, jobs.stacked, arrivals)
    found = wait_for_runs(workers.engine, job_name, job_ids)
    workers.stop(work)

    # The main limit's key is the job's rate_limit_key; both budgets were charged.
    assert {run.budget_key for run in found} == {f"{job_name}/global"}
    assert budget_keys(workers.engine, f"{job_name}/") == [
        f"{job_name}/global",
        f"{job_name}/minute/global",
    ]
    check_guarantee(found, jobs.PER_SECOND)
    check_guarantee(found, jobs.PER_MINUTE)
    # Each limit held the backlog back: more jobs came than the minute's window admits, so
    # the last was admitted at least (count - burst) minute intervals after the first.
    admissions = [run.admitted_at for run in found]
    assert len(found) > jobs.PER_MINUTE.to
    span = (admissions[-1] - admissions[0]) / dt.timedelta(seconds=1)
    assert span >= (len(found) - jobs.PER_MINUTE.burst) * jobs.PER_MINUTE.interval - 1e-6


def test_draw_stacked_gives_more_jobs_than_the_minute_admits_over_one_to_three_seconds():
    for seed in range(50):
        arrivals = draw_stacked(seed)
        count = sum(len(arrival.arguments) for arrival in arrivals)
        assert jobs.PER_MINUTE.to + 2 <= count <= jobs.PER_MINUTE.to + 4
        assert arrivals[0].at == 0.0 and 1.0 <= arrivals[-1].at <= 3.0
        values = [args[0] for arrival in arrivals for args in arrival.arguments]
        assert values == list(range(count))


# A limit counted in units.

WEIGHTED_SEEDS = [2, 11]


def draw_weighted(seed: int) -> list[Arrival]:
    """Calls costing 1 to ``burst`` units each, until they add up to a few more units than a
    window admits (16 to 28 against 12 per 2 s), over 1 to 2.5 seconds."""
    rng = random.Random(seed)
    wanted = rng.randint(jobs.UNITS.to + 4, 2 * jobs.UNITS.to + 4)
    arguments: list[tuple[t.Any, ...]] = []
    while sum(units for units, _value in arguments) < wanted:
        arguments.append((rng.randint(1, jobs.UNITS.burst), len(arguments)))
    return spread(rng, arguments, rng.uniform(1.0, 2.5))


def most_units_in_a_window(runs: t.Sequence[tuple[dt.datetime, int]], length: float) -> int:
    """The most units any half-open window ``[x, x + length)`` holds, of ``(time, units)``
    admissions (the busiest window starts at one of the times)."""
    ordered = sorted(runs)
    window = dt.timedelta(seconds=length)
    return max(
        sum(units for at, units in ordered[index:] if at < start + window)
        for index, (start, _units) in enumerate(ordered)
    )


def too_close_in_units(
    runs: t.Sequence[tuple[dt.datetime, int]], limit: Limit
) -> list[tuple[int, float]]:
    """Every run of consecutive admissions of ``U`` units in all that spans less than
    ``(U - burst) * T``, as (U, span in seconds). The weighted GCRA admits ``u`` units at
    ``now >= tat - (burst - u) * T`` and moves ``tat`` on by ``u * T``, so the last charged
    of any set of admissions comes ``(U - burst) * T`` after the earliest of them at least:
    this is empty whatever the timing (and with ``span < per = (to - burst + 1) * T`` it
    gives the window bound in units)."""
    ordered = sorted(runs)
    found = []
    for first in range(len(ordered)):
        total = 0
        for last in range(first, len(ordered)):
            total += ordered[last][1]
            span = ordered[last][0] - ordered[first][0]
            if (
                span / dt.timedelta(microseconds=1)
                < (total - limit.burst) * limit.interval * 1e6 - 1e-3
            ):
                found.append((total, processes.seconds(span)))
    return found


def units_of(found: t.Sequence[Run]) -> list[tuple[dt.datetime, int]]:
    return [(run.admitted_at, int(run.value)) for run in found]


@pytest.mark.parametrize("seed", WEIGHTED_SEEDS)
def test_units_admitted_in_any_window_of_per_add_up_to_to_at_most_across_two_processes(
    app, workers, seed
):
    arrivals = draw_weighted(seed)
    job_name = "stacked_process_test.weighted"
    work = workers.start()
    job_ids = arrive(app, jobs.weighted, arrivals)
    found = wait_for_runs(workers.engine, job_name, job_ids)
    workers.stop(work)

    assert {run.budget_key for run in found} == {f"{job_name}/global"}
    # Each job ran once, with the units it was enqueued with.
    enqueued = [units for arrival in arrivals for units, _value in arrival.arguments]
    assert {run.job_id: int(run.value) for run in found} == dict(
        zip(job_ids, enqueued, strict=True)
    )
    admitted = units_of(found)
    assert most_units_in_a_window(admitted, jobs.UNITS.per) <= jobs.UNITS.to, [
        (processes.seconds(at - admitted[0][0]), units) for at, units in admitted
    ]
    assert too_close_in_units(admitted, jobs.UNITS) == []
    assert all(run.started_at >= run.admitted_at for run in found)
    # More units came than a window admits: counting claims alone would have let them by.
    assert sum(units for _at, units in admitted) > jobs.UNITS.to


def test_draw_weighted_gives_a_few_more_units_than_a_window_admits():
    for seed in range(50):
        arrivals = draw_weighted(seed)
        units = [args[0] for arrival in arrivals for args in arrival.arguments]
        assert all(1 <= unit <= jobs.UNITS.burst for unit in units)
        assert jobs.UNITS.to + 4 <= sum(units) <= 2 * jobs.UNITS.to + 4 + jobs.UNITS.burst - 1
        assert arrivals[0].at == 0.0 and 1.0 <= arrivals[-1].at <= 2.5


def test_the_units_checks_catch_one_unit_too_many():
    limit = Limit(to=5, per=1.0, burst=3)  # T = 1/3: 3 units at once, then one every 1/3 s
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

    def at(offset: float) -> dt.datetime:
        return base + dt.timedelta(seconds=offset)

    admitted = [(at(0), 3), (at(1 / 3 + 1e-6), 1), (at(2 / 3 + 1e-6), 1), (at(4 / 3 + 1e-6), 2)]
    assert most_units_in_a_window(admitted, limit.per) == 5
    assert too_close_in_units(admitted, limit) == []
    # Two units at 2/3 s: six units within a second.
    heavy = [*admitted[:2], (at(2 / 3 + 1e-6), 2)]
    assert most_units_in_a_window(heavy, limit.per) == 6
    assert too_close_in_units(heavy, limit) == [(6, pytest.approx(2 / 3 + 1e-6))]
    # Counted as claims, the same admissions keep a claim limit of 5 easily.
    assert most_in_a_window([moment for moment, _units in heavy], limit.per) == 3
    assert too_close([moment for moment, _units in heavy], Limit(5, 1.0, 3)) == []
