"""``flask solidq stats`` on every backend: the table per job class and per queue, its
window and filters, and the line it prints when nothing was counted."""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq.timing import utcnow
from tests.reads.test_job_stats import seed

if t.TYPE_CHECKING:
    from flask import Flask


def stats(app: Flask, *args: str) -> str:
    result = app.test_cli_runner().invoke(args=["solidq", "stats", *args])
    assert result.exit_code == 0, result.output
    return result.output


def seed_recent_runs(engine: sa.Engine) -> None:
    minute = utcnow().replace(second=0, microsecond=0)
    seed(
        engine,
        {
            (minute - dt.timedelta(minutes=2), "Report", "default"): [(0.003, 0.5, False)] * 3
            + [(0.3, 70.0, True)],
            (minute - dt.timedelta(minutes=3), "Mail", "low"): [(2.0, 0.0005, False)],
            (minute - dt.timedelta(hours=3), "Mail", "low"): [(50.0, 0.0005, True)],
        },
    )


def test_stats_prints_a_table_per_job_class_and_per_queue(app: Flask, engine: sa.Engine) -> None:
    seed_recent_runs(engine)

    output = stats(app, "--since", "1h")

    # Report's durations: three in 2-4 ms (p50 interpolated there), one of 300 ms (the p95
    # would be 461 ms in its band, but no run took longer than the maximum).
    report = "  Report     4         1      25.0  3.3ms  300ms  300ms        427ms  1m10s  1m10s"
    mail = "  Mail       1         0       0.0  1.54s  2.00s  2.00s        0.5ms  0.5ms  0.5ms"
    assert output.splitlines() == [
        "By job class, last 1h:",
        "",
        "  Job     Runs  Failures  Failed %    p50    p95    Max  Latency p50    p95    Max",
        report,
        mail,
        "",
        "By queue, last 1h:",
        "",
        "  Queue    Runs  Failures  Failed %    p50    p95    Max  Latency p50    p95    Max",
        "  default     4         1      25.0  3.3ms  300ms  300ms        427ms  1m10s  1m10s",
        "  low         1         0       0.0  1.54s  2.00s  2.00s        0.5ms  0.5ms  0.5ms",
    ]


def test_stats_takes_a_window_and_filters(app: Flask, engine: sa.Engine) -> None:
    seed_recent_runs(engine)

    day = stats(app, "--since", "1d", "--job", "Mail")
    default_window = stats(app, "--queue", "low")
    nothing = stats(app, "--since", "1h", "--job", "Unknown")

    assert "  Mail     2         1      50.0  2.05s  50.00s  50.00s" in day
    assert "Report" not in day
    assert day.startswith("By job class, last 1d:")
    assert default_window == day
    assert nothing == "No runs counted in the last 1h.\n"


def test_stats_refuses_a_window_it_does_not_know(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["solidq", "stats", "--since", "2h"])
    assert result.exit_code == 2
    assert "'2h' is not one of '1h', '1d', '7d'" in result.output
