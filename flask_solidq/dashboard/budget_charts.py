"""The budgets page's charts: for each budget, its admissions per second over the last
minutes (the ring its claims keep, :mod:`flask_solidq.controls.rate_limit.admission_ring`), drawn
against its limit (``to`` per ``per`` seconds, as a rate per second) when this app declares it. The
ring of a limit counted in units (``limits_rate(cost=)``) holds units, and its chart says so:
"units/s" against a limit of units, never a count of claims."""

from __future__ import annotations

import dataclasses
import datetime as dt

from flask_solidq.controls.rate_limit import admission_ring
from flask_solidq.dashboard import bar_chart
from flask_solidq.reads import control_reads

SECOND = dt.timedelta(seconds=1)
#: The seconds a chart shows: all the ring remembers.
SECONDS = admission_ring.SECONDS


@dataclasses.dataclass(frozen=True)
class BudgetChart:
    key: str
    chart: bar_chart.BarChart
    #: The limit per second, None when the job that declares it isn't imported here.
    per_second: float | None
    #: What a bar counts: "units" for a limit counted in units, else "admitted" (claims).
    unit: str = "admitted"


def charts(rows: list[control_reads.BudgetRow], now: dt.datetime) -> list[BudgetChart]:
    """A chart per budget of ``rows`` that admitted anything in the last :data:`SECONDS`."""
    drawn = []
    for row in rows:
        counts = admission_ring.per_second(row.admissions, now, SECONDS)
        if any(counts):
            drawn.append(_chart(row.key, counts, now))
    return drawn


def _chart(key: str, counts: list[int], now: dt.datetime) -> BudgetChart:
    outlook = control_reads.budget_outlook(key, None, now)
    limit = outlook.limit.to / outlook.limit.per if outlook else None
    units = outlook is not None and outlook.counts_units
    since = now.replace(microsecond=0) - SECOND * (SECONDS - 1)
    chart = bar_chart.draw(
        # The series keeps its name: the stylesheet colours bars by it.
        [bar_chart.Series("admitted", counts)],
        since,
        SECOND,
        y_title="Units admitted per second" if units else "Admitted per second",
        label_every=60,
        limit=limit,
    )
    return BudgetChart(key, chart, limit, "units" if units else "admitted")
