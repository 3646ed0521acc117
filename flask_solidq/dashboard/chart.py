"""The overview's throughput chart: bars drawn server-side as SVG, so the page needs no
JavaScript charting library and the chart refreshes with the rest of the overview.

This module only does the geometry (pure, so it is tested without a page); the template
``solidq/_throughput.html`` draws the bars and their tooltips.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

#: The chart's drawing area, in SVG user units (the template scales it to the page).
WIDTH = 600
HEIGHT = 80


@dataclasses.dataclass(frozen=True)
class Bar:
    """One minute's bar: where it is drawn, and what its tooltip says."""

    x: float
    y: float
    width: float
    height: float
    count: int
    starts_at: dt.datetime


@dataclasses.dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    #: The busiest minute's count (the top of the scale).
    peak: int
    total: int
    width: int = WIDTH
    height: int = HEIGHT


def bars(per_minute: list[int], since: dt.datetime) -> Chart:
    """A bar per minute, scaled to the busiest minute; a minute with no job has no bar."""
    peak = max(per_minute, default=0)
    slot = WIDTH / max(len(per_minute), 1)
    drawn = []
    for index, count in enumerate(per_minute):
        if not count:
            continue
        height = max(1.0, HEIGHT * count / peak)
        drawn.append(
            Bar(
                x=round(index * slot + 0.5, 2),
                y=round(HEIGHT - height, 2),
                width=round(max(slot - 1, 1), 2),
                height=round(height, 2),
                count=count,
                starts_at=since + dt.timedelta(minutes=index),
            )
        )
    return Chart(drawn, peak, sum(per_minute))
