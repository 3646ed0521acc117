"""Bar charts with labelled axes, drawn server-side as SVG: a queue's jobs finished and failed
per minute or per quarter hour, a budget's admissions per second against its limit.

Only the geometry lives here, pure, so it is tested without a page; the template
``solidq/_bar_chart.html`` draws it. Each slot of time has one bar of stacked series (finished
under failed); the vertical scale runs from 0 to a round number at or above the busiest slot
(and the limit, when there is one), with a tick at its middle; the time axis is labelled at
regular slots, in UTC.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import typing as t

#: The drawing, in SVG user units (the template lets the page scale it, text included).
WIDTH = 640
HEIGHT = 170
#: Room left of the plot for the count labels and the vertical axis's title, under it for the
#: time labels and the horizontal axis's title, and right of it for half the last time label.
LEFT = 52
BOTTOM = 34
TOP = 8
RIGHT = 24


@dataclasses.dataclass(frozen=True)
class Series:
    """One kind of count per slot (``name`` is also the CSS class of its bars)."""

    name: str
    counts: t.Sequence[float]


@dataclasses.dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    series: str
    count: float
    starts_at: dt.datetime


@dataclasses.dataclass(frozen=True)
class Tick:
    """A labelled point of an axis: ``at`` is x on the time axis, y on the count axis."""

    at: float
    label: str


@dataclasses.dataclass(frozen=True)
class BarChart:
    bars: list[Bar]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    x_title: str
    y_title: str
    #: The top of the scale.
    top: float
    #: Each series' sum, by name.
    totals: dict[str, float]
    #: Where the limit's line is drawn (y), and its value; None without a limit.
    limit_y: float | None = None
    limit: float | None = None
    #: How a bar's tooltip says its slot's start.
    time_format: str = "%H:%M"
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    plot_top: int = TOP
    plot_bottom: int = HEIGHT - BOTTOM
    plot_right: int = WIDTH - RIGHT


def nice_top(value: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``value`` (1 for 0)."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return float(step * power)
    raise AssertionError("unreachable: 10 * power >= value")


def draw(
    series: list[Series],
    since: dt.datetime,
    slot: dt.timedelta,
    *,
    y_title: str,
    label_every: int,
    limit: float | None = None,
) -> BarChart:
    """The bars of ``series`` (equal lengths, slot 0 starting at ``since``), stacked per slot
    in the given order, and the axes; ``label_every`` slots get a time label."""
    slots = len(series[0].counts) if series else 0
    peak = max((sum(s.counts[i] for s in series) for i in range(slots)), default=0.0)
    top = nice_top(max(peak, limit or 0.0))
    plot = _Plot(slots, top)
    bars = [
        bar for index in range(slots) for bar in plot.stack(series, index, since + slot * index)
    ]
    return BarChart(
        bars=bars,
        x_ticks=[
            Tick(plot.x(index), _time_label(since + slot * index, slot))
            for index in range(0, slots + 1, label_every)
        ],
        y_ticks=[Tick(plot.y(value), _count_label(value)) for value in (0.0, top / 2, top)],
        x_title="Time (UTC)",
        y_title=y_title,
        top=top,
        totals={s.name: sum(s.counts) for s in series},
        limit_y=None if limit is None else plot.y(limit),
        limit=limit,
        time_format=_time_format(slot),
    )


class _Plot:
    """Slot index and count to SVG coordinates."""

    def __init__(self, slots: int, top: float) -> None:
        self.slot_width = (WIDTH - RIGHT - LEFT) / max(slots, 1)
        self.top = top

    def x(self, index: int) -> float:
        return round(LEFT + index * self.slot_width, 2)

    def y(self, value: float) -> float:
        return round(HEIGHT - BOTTOM - (HEIGHT - BOTTOM - TOP) * value / self.top, 2)

    def stack(self, series: list[Series], index: int, starts_at: dt.datetime) -> list[Bar]:
        """The bars of one slot, each on the one before; a zero count draws nothing."""
        bars, below = [], 0.0
        for one in series:
            count = one.counts[index]
            if count:
                bottom, top = self.y(below), self.y(below + count)
                bars.append(
                    Bar(
                        x=round(self.x(index) + 0.5, 2),
                        y=top,
                        width=round(max(self.slot_width - 1, 0.5), 2),
                        height=round(max(bottom - top, 0.5), 2),
                        series=one.name,
                        count=count,
                        starts_at=starts_at,
                    )
                )
            below += count
        return bars


def _time_format(slot: dt.timedelta) -> str:
    """``HH:MM``, or ``HH:MM:SS`` for slots shorter than a minute, or ``Mon 06 HH:MM`` for
    slots of an hour or more (a week's chart)."""
    if slot >= dt.timedelta(hours=1):
        return "%a %d %H:%M"
    return "%H:%M:%S" if slot < dt.timedelta(minutes=1) else "%H:%M"


def _time_label(at: dt.datetime, slot: dt.timedelta) -> str:
    """An axis label: the time, or the day (``Mon 06``) on a chart of hours."""
    return at.strftime("%a %d" if slot >= dt.timedelta(hours=1) else _time_format(slot))


def _count_label(value: float) -> str:
    return f"{value:g}"
