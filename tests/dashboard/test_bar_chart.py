"""The geometry of the dashboard's bar charts (:mod:`flask_solidq.dashboard.bar_chart`): the
scale's round top, stacked bars, the axes' ticks and labels, a limit's line."""

from __future__ import annotations

import datetime as dt

import pytest

from flask_solidq.dashboard import bar_chart
from flask_solidq.dashboard.bar_chart import Series

SINCE = dt.datetime(2026, 1, 1, 12, 0)
MINUTE = dt.timedelta(minutes=1)
#: The plot's bottom and height, in SVG units.
BOTTOM = bar_chart.HEIGHT - bar_chart.BOTTOM
PLOT_HEIGHT = BOTTOM - bar_chart.TOP


@pytest.mark.parametrize(
    ("value", "top"),
    [(0, 1), (1, 1), (1.5, 2), (2, 2), (3, 5), (7, 10), (10, 10), (11, 20), (420, 500), (0.3, 1)],
)
def test_the_scale_tops_at_one_two_or_five_times_a_power_of_ten(value, top):
    assert bar_chart.nice_top(value) == top


def test_bars_stack_per_slot_and_scale_to_the_round_top():
    chart = bar_chart.draw(
        [Series("finished", [0, 3, 1, 0]), Series("failed", [0, 1, 0, 0])],
        SINCE,
        MINUTE,
        y_title="Jobs per minute",
        label_every=2,
    )

    assert chart.top == 5  # the busiest slot holds 4
    finished, failed, lone = chart.bars
    assert (finished.series, finished.count, finished.starts_at) == ("finished", 3, SINCE + MINUTE)
    assert finished.height == pytest.approx(PLOT_HEIGHT * 3 / 5, abs=0.01)
    assert finished.y + finished.height == pytest.approx(BOTTOM)
    # The failed bar sits on the finished one, in the same slot.
    assert (failed.series, failed.x) == ("failed", finished.x)
    assert failed.y + failed.height == pytest.approx(finished.y)
    assert failed.height == pytest.approx(PLOT_HEIGHT / 5, abs=0.01)
    assert lone.x > finished.x and lone.count == 1
    assert chart.totals == {"finished": 4, "failed": 1}


def test_the_axes_are_labelled_in_time_and_counts():
    chart = bar_chart.draw(
        [Series("finished", [2] * 60)], SINCE, MINUTE, y_title="Jobs per minute", label_every=15
    )

    assert (chart.x_title, chart.y_title) == ("Time (UTC)", "Jobs per minute")
    assert [tick.label for tick in chart.x_ticks] == ["12:00", "12:15", "12:30", "12:45", "13:00"]
    assert chart.x_ticks[0].at == bar_chart.LEFT
    assert chart.x_ticks[-1].at == pytest.approx(bar_chart.WIDTH - bar_chart.RIGHT)
    assert [(tick.label, tick.at) for tick in chart.y_ticks] == [
        ("0", BOTTOM),
        ("1", pytest.approx(BOTTOM - PLOT_HEIGHT / 2, abs=0.01)),
        ("2", bar_chart.TOP),
    ]
    assert chart.time_format == "%H:%M"


def test_an_empty_window_draws_axes_and_no_bar():
    chart = bar_chart.draw(
        [Series("finished", [0] * 60), Series("failed", [0] * 60)],
        SINCE,
        MINUTE,
        y_title="Jobs per minute",
        label_every=15,
    )

    assert chart.bars == []
    assert chart.top == 1 and len(chart.x_ticks) == 5


def test_a_limit_raises_the_scale_and_draws_its_line_in_seconds():
    second = dt.timedelta(seconds=1)
    chart = bar_chart.draw(
        [Series("admitted", [1, 0, 2])],
        SINCE,
        second,
        y_title="Admitted per second",
        label_every=1,
        limit=4,
    )

    assert chart.top == 5
    assert chart.limit == 4
    assert chart.limit_y == pytest.approx(BOTTOM - PLOT_HEIGHT * 4 / 5, abs=0.01)
    assert [tick.label for tick in chart.x_ticks] == [
        "12:00:00",
        "12:00:01",
        "12:00:02",
        "12:00:03",
    ]
    assert chart.time_format == "%H:%M:%S"
