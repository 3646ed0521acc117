"""Job statistics over a window (the last hour, day or week): runs, failures, duration and
queue latency percentiles and maxima, per job class and per queue, and runs per slot of time
for a chart. What the dashboard's stats page and ``flask solidq stats`` show.

Everything is read from ``solidq_job_stats``' minute buckets (written by the workers, see
:mod:`flask_solidq.processes.job_stats`) along its ``(minute_at, ...)`` unique index: a
window costs its buckets, a week at most 10,080 per job class and queue, never the jobs.
Percentiles are estimated from the summed histogram bands, interpolated within the band the
rank falls in; so they are as precise as a band is narrow (each is twice the one below), and
never above the exact maximum.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import typing as t

import sqlalchemy as sa

from flask_solidq.models.job_stats import BAND_EDGES
from flask_solidq.models.job_stats import DURATION_BANDS
from flask_solidq.models.job_stats import LATENCY_BANDS
from flask_solidq.models.tables import JOB_STATS


class Window(str, enum.Enum):
    """The windows the statistics are read over."""

    HOUR = "1h"
    DAY = "1d"
    WEEK = "7d"

    @property
    def length(self) -> dt.timedelta:
        return _LENGTHS[self]

    @property
    def slot(self) -> dt.timedelta:
        """The slot of time one bar of its chart counts."""
        return _SLOTS[self]

    def since(self, now: dt.datetime) -> dt.datetime:
        """The window's first minute, when it ends with ``now``'s minute (the week: with
        ``now``'s hour, as the buckets older than a day are whole hours)."""
        end = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
        if self is Window.WEEK:
            end = now.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1)
        return end - self.length


_LENGTHS = {
    Window.HOUR: dt.timedelta(hours=1),
    Window.DAY: dt.timedelta(days=1),
    Window.WEEK: dt.timedelta(days=7),
}
_SLOTS = {
    Window.HOUR: dt.timedelta(minutes=1),
    Window.DAY: dt.timedelta(minutes=15),
    Window.WEEK: dt.timedelta(hours=1),
}


@dataclasses.dataclass(frozen=True)
class Figures:
    """The statistics of one job class or queue (``name``) over a window; times in
    seconds."""

    name: str
    runs: int
    failures: int
    duration_p50: float
    duration_p95: float
    duration_max: float
    latency_p50: float
    latency_p95: float
    latency_max: float

    @property
    def failure_rate(self) -> float:
        return self.failures / self.runs if self.runs else 0.0


@dataclasses.dataclass(frozen=True)
class Filter:
    """Which buckets count: those of one job class and/or one queue, or all."""

    job: str | None = None
    queue: str | None = None

    def conditions(self, since: dt.datetime) -> list[sa.ColumnElement[bool]]:
        conditions = [JOB_STATS.c.minute_at >= since]
        if self.job is not None:
            conditions.append(JOB_STATS.c.class_name == self.job)
        if self.queue is not None:
            conditions.append(JOB_STATS.c.queue_name == self.queue)
        return conditions


_BAND_COUNT = len(DURATION_BANDS)
_SUMS = [
    sa.func.sum(JOB_STATS.c[name]) for name in ("runs", "failures", *DURATION_BANDS, *LATENCY_BANDS)
]
_MAXIMA = [sa.func.max(JOB_STATS.c.duration_max), sa.func.max(JOB_STATS.c.latency_max)]


@dataclasses.dataclass(frozen=True)
class Table:
    """A window's figures per job class and per queue, each busiest first."""

    jobs: list[Figures]
    queues: list[Figures]


def figures(connection: sa.Connection, since: dt.datetime, where: Filter = Filter()) -> Table:
    """Each job class's and each queue's figures from ``since``: one read of the window's
    buckets grouped by both, summed here per job class and per queue (their histograms add
    up; their maxima are the greatest)."""
    statement = (
        sa.select(JOB_STATS.c.class_name, JOB_STATS.c.queue_name, *_SUMS, *_MAXIMA)
        .where(*where.conditions(since))
        .group_by(JOB_STATS.c.class_name, JOB_STATS.c.queue_name)
    )
    jobs: dict[str, list[float]] = {}
    queues: dict[str, list[float]] = {}
    for class_name, queue_name, *values in connection.execute(statement):
        counts = [float(value or 0) for value in values]
        _add(jobs.setdefault(class_name, [0.0] * len(counts)), counts)
        _add(queues.setdefault(queue_name, [0.0] * len(counts)), counts)
    return Table(_ranked(jobs), _ranked(queues))


def _add(totals: list[float], counts: list[float]) -> None:
    """Add one group's sums to ``totals``, keeping the greater of the two maxima (last)."""
    for index in range(len(counts) - 2):
        totals[index] += counts[index]
    totals[-2] = max(totals[-2], counts[-2])
    totals[-1] = max(totals[-1], counts[-1])


def _ranked(totals: dict[str, list[float]]) -> list[Figures]:
    ranked = [_figures(name, values) for name, values in totals.items()]
    return sorted(ranked, key=lambda each: (-each.runs, each.name))


def _figures(name: str, values: list[float]) -> Figures:
    runs, failures, *rest = values
    durations = [int(count) for count in rest[:_BAND_COUNT]]
    latencies = [int(count) for count in rest[_BAND_COUNT : 2 * _BAND_COUNT]]
    duration_max, latency_max = rest[2 * _BAND_COUNT :]
    return Figures(
        name=name,
        runs=int(runs),
        failures=int(failures),
        duration_p50=percentile(durations, 0.5, duration_max),
        duration_p95=percentile(durations, 0.95, duration_max),
        duration_max=duration_max,
        latency_p50=percentile(latencies, 0.5, latency_max),
        latency_p95=percentile(latencies, 0.95, latency_max),
        latency_max=latency_max,
    )


def percentile(bands: t.Sequence[int], fraction: float, maximum: float) -> float:
    """The ``fraction`` quantile of the values counted in ``bands`` (a histogram over
    :data:`~flask_solidq.models.job_stats.BAND_EDGES`), interpolated linearly within its
    band, and at most ``maximum`` (the largest value, known exactly); 0 for no value."""
    total = sum(bands)
    if not total:
        return 0.0
    rank = fraction * total
    below = 0
    for index, count in enumerate(bands):
        if count and below + count >= rank:
            lower, upper = band_range(index, maximum)
            return min(lower + (upper - lower) * (rank - below) / count, maximum)
        below += count
    return maximum


def band_range(index: int, maximum: float) -> tuple[float, float]:
    """Band ``index``'s lower and upper edges, in seconds; the last band ends at
    ``maximum``."""
    lower = BAND_EDGES[index - 1] if index else 0.0
    upper = BAND_EDGES[index] if index < len(BAND_EDGES) else max(maximum, lower)
    return lower, upper


@dataclasses.dataclass(frozen=True)
class Runs:
    """Runs per slot of a window (``succeeded[0]`` is the slot starting at ``since``):
    those that succeeded and those that raised."""

    since: dt.datetime
    slot: dt.timedelta
    succeeded: list[int]
    failed: list[int]


def runs_per_slot(
    connection: sa.Connection, window: Window, now: dt.datetime, where: Filter = Filter()
) -> Runs:
    """The runs of ``window`` ending with ``now``'s minute, per slot of the window's chart:
    one grouped read of the window's minutes, folded into slots here."""
    since = window.since(now)
    slots = int(window.length / window.slot)
    succeeded, failed = [0] * slots, [0] * slots
    statement = (
        sa.select(
            JOB_STATS.c.minute_at,
            sa.func.sum(JOB_STATS.c.runs),
            sa.func.sum(JOB_STATS.c.failures),
        )
        .where(*where.conditions(since))
        .group_by(JOB_STATS.c.minute_at)
    )
    for minute_at, runs, failures in connection.execute(statement):
        index = min(max(int((minute_at - since) / window.slot), 0), slots - 1)
        failed[index] += int(failures or 0)
        succeeded[index] += int(runs or 0) - int(failures or 0)
    return Runs(since, window.slot, succeeded, failed)
