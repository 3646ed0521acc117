"""Recurring schedules: every phrase and cron form, time zones and DST, and refusals that quote
the text."""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from flask_solidq.recurring.schedule import Schedule

UTC = dt.timezone.utc


def at(text: str) -> dt.datetime:
    """An aware UTC datetime from ``"2025-01-31 23:59:30"``."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def ticks(schedule: str, start: str, count: int = 3) -> list[str]:
    """The next ``count`` ticks of ``schedule`` after ``start``, as UTC ISO strings."""
    parsed = Schedule.parse(schedule)
    moment = at(start)
    found = []
    for _ in range(count):
        moment = parsed.next_time_after(moment)
        found.append(moment.strftime("%Y-%m-%d %H:%M:%S"))
    return found


@pytest.mark.parametrize(
    ("text", "start", "expected"),
    [
        ("every second", "2025-01-31 23:59:58.5", ["2025-01-31 23:59:59", "2025-02-01 00:00:00"]),
        ("every 15 seconds", "2025-01-31 23:59:30", ["2025-01-31 23:59:45", "2025-02-01 00:00:00"]),
        ("every minute", "2025-01-31 23:58:10", ["2025-01-31 23:59:00", "2025-02-01 00:00:00"]),
        ("every 1 minute", "2025-01-31 23:58:10", ["2025-01-31 23:59:00", "2025-02-01 00:00:00"]),
        ("every 20 minutes", "2025-01-31 23:30:00", ["2025-01-31 23:40:00", "2025-02-01 00:00:00"]),
        ("every hour", "2025-01-31 22:30:00", ["2025-01-31 23:00:00", "2025-02-01 00:00:00"]),
        (
            "every hour at minute 27",
            "2025-01-31 22:30:00",
            ["2025-01-31 23:27:00", "2025-02-01 00:27:00"],
        ),
        ("every 6 hours", "2025-01-31 13:00:00", ["2025-01-31 18:00:00", "2025-02-01 00:00:00"]),
        (
            "every 12 hours at minute 5",
            "2025-01-31 13:00:00",
            ["2025-02-01 00:05:00", "2025-02-01 12:05:00"],
        ),
        ("every day", "2025-01-31 13:00:00", ["2025-02-01 00:00:00", "2025-02-02 00:00:00"]),
        ("every day at 3am", "2025-01-31 13:00:00", ["2025-02-01 03:00:00", "2025-02-02 03:00:00"]),
        (
            "every day at 9:30pm",
            "2025-01-31 13:00:00",
            ["2025-01-31 21:30:00", "2025-02-01 21:30:00"],
        ),
        (
            "every day at 9:30 PM",
            "2025-01-31 13:00:00",
            ["2025-01-31 21:30:00", "2025-02-01 21:30:00"],
        ),
        ("every day at 15:00", "2025-01-31 15:00:00", ["2025-02-01 15:00:00"]),
        ("every day at 12am", "2025-01-31 13:00:00", ["2025-02-01 00:00:00"]),
        ("every day at 12pm", "2025-01-31 13:00:00", ["2025-02-01 12:00:00"]),
        ("every day at noon", "2025-01-31 11:00:00", ["2025-01-31 12:00:00"]),
        ("every day at midnight", "2025-01-31 11:00:00", ["2025-02-01 00:00:00"]),
        (
            # 2025-01-31 is a Friday: the weekend is skipped.
            "every weekday at 9am",
            "2025-01-31 10:00:00",
            ["2025-02-03 09:00:00", "2025-02-04 09:00:00"],
        ),
        (
            "every monday at 8am",
            "2025-01-31 10:00:00",
            ["2025-02-03 08:00:00", "2025-02-10 08:00:00"],
        ),
        ("every sunday", "2025-01-31 10:00:00", ["2025-02-02 00:00:00"]),
        ("every fri at 17:45", "2025-01-31 10:00:00", ["2025-01-31 17:45:00"]),
        ("every week", "2025-01-31 10:00:00", ["2025-02-02 00:00:00", "2025-02-09 00:00:00"]),
        ("every month", "2025-12-15 10:00:00", ["2026-01-01 00:00:00", "2026-02-01 00:00:00"]),
        (
            "every month on day 1 at 2am",
            "2025-12-31 23:00:00",
            ["2026-01-01 02:00:00", "2026-02-01 02:00:00"],
        ),
        (
            # Months without a 31st are skipped, as cron skips them.
            "every month on the 31st",
            "2025-01-31 10:00:00",
            ["2025-03-31 00:00:00", "2025-05-31 00:00:00"],
        ),
    ],
)
def test_each_phrase_ticks_at_the_times_it_says(text, start, expected):
    assert ticks(text, start, len(expected)) == expected


@pytest.mark.parametrize(
    ("text", "start", "expected"),
    [
        ("*/5 * * * *", "2025-01-31 23:52:00", ["2025-01-31 23:55:00", "2025-02-01 00:00:00"]),
        ("0 9 * * 1-5", "2025-01-31 10:00:00", ["2025-02-03 09:00:00", "2025-02-04 09:00:00"]),
        ("0 0 * * MON", "2025-01-31 10:00:00", ["2025-02-03 00:00:00"]),
        ("0 0 L * *", "2025-01-31 10:00:00", ["2025-02-28 00:00:00", "2025-03-31 00:00:00"]),
        ("0 0 29 2 *", "2025-01-31 10:00:00", ["2028-02-29 00:00:00"]),
        ("30 */10 * * * *", "2025-01-31 23:59:00", ["2025-02-01 00:00:30", "2025-02-01 00:10:30"]),
        ("@hourly", "2025-01-31 23:30:00", ["2025-02-01 00:00:00"]),
        ("@daily", "2025-01-31 23:30:00", ["2025-02-01 00:00:00"]),
        ("@monthly", "2025-12-31 23:30:00", ["2026-01-01 00:00:00"]),
    ],
)
def test_cron_expressions_tick_as_cron_does(text, start, expected):
    assert ticks(text, start, len(expected)) == expected


def test_six_field_cron_puts_the_seconds_first():
    assert Schedule.parse("*/20 * * * * *").cron == "*/20 * * * * *"
    assert ticks("*/20 * * * * *", "2025-01-31 23:59:45", 2) == [
        "2025-02-01 00:00:00",
        "2025-02-01 00:00:20",
    ]


def test_phrases_mean_the_cron_expression_they_stand_for():
    assert Schedule.parse("every weekday at 9am").cron == "0 9 * * 1-5"
    assert Schedule.parse("every 5 minutes").cron == "*/5 * * * *"
    assert Schedule.parse("every hour at minute 27").cron == "27 * * * *"
    assert Schedule.parse("every month on day 15 at 2:30pm").cron == "30 14 15 * *"


def test_a_moment_on_a_tick_gets_the_next_tick_strictly_after_it():
    schedule = Schedule.parse("every 5 minutes")

    assert schedule.next_time_after(at("2025-01-01 12:05:00")) == at("2025-01-01 12:10:00")
    assert schedule.next_time_after(at("2025-01-01 12:04:59.999999")) == at("2025-01-01 12:05:00")
    assert schedule.next_time_after(at("2025-01-01 12:05:00.000001")) == at("2025-01-01 12:10:00")


def test_previous_time_is_the_last_tick_at_or_before_the_moment():
    schedule = Schedule.parse("every 5 minutes")

    assert schedule.previous_time(at("2025-01-01 12:05:00")) == at("2025-01-01 12:05:00")
    assert schedule.previous_time(at("2025-01-01 12:04:59.999999")) == at("2025-01-01 12:00:00")
    assert schedule.previous_time(at("2025-01-01 00:01:00")) == at("2025-01-01 00:00:00")


def test_ticks_are_aware_utc_whatever_zone_or_naivety_the_moment_has():
    schedule = Schedule.parse("every hour")
    in_paris = dt.datetime(2025, 1, 1, 12, 30, tzinfo=ZoneInfo("Europe/Paris"))

    tick = schedule.next_time_after(in_paris)
    naive_tick = schedule.next_time_after(dt.datetime(2025, 1, 1, 11, 30))

    assert tick == naive_tick == at("2025-01-01 12:00:00")
    assert tick.tzinfo is UTC
    assert tick.microsecond == 0


def test_a_time_zone_suffix_reads_the_times_on_that_zones_clock():
    assert ticks("every day at 9am Europe/Paris", "2025-01-31 10:00:00", 1) == [
        "2025-02-01 08:00:00"
    ]
    assert ticks("0 9 * * * America/New_York", "2025-01-31 10:00:00", 1) == ["2025-01-31 14:00:00"]
    assert ticks("every day at 9am Asia/Kolkata", "2025-01-31 10:00:00", 1) == [
        "2025-02-01 03:30:00"
    ]


def test_time_zones_and_words_match_without_regard_to_case():
    schedule = Schedule.parse("  Every  Day AT 9AM  europe/paris ")

    assert (schedule.cron, schedule.zone) == ("0 9 * * *", "Europe/Paris")
    assert Schedule.parse("every day utc").zone == "UTC"
    assert str(schedule) == "  Every  Day AT 9AM  europe/paris "


def test_a_daily_time_keeps_its_wall_clock_hour_across_daylight_saving_changes():
    # Paris moves to summer time on 2025-03-30 and back on 2025-10-26.
    assert ticks("every day at 9am Europe/Paris", "2025-03-29 00:00:00") == [
        "2025-03-29 08:00:00",
        "2025-03-30 07:00:00",
        "2025-03-31 07:00:00",
    ]
    assert ticks("every day at 9am Europe/Paris", "2025-10-25 00:00:00") == [
        "2025-10-25 07:00:00",
        "2025-10-26 08:00:00",
        "2025-10-27 08:00:00",
    ]


def test_a_time_the_spring_change_skips_fires_when_the_clocks_jump():
    # 02:30 doesn't exist in Paris on 2025-03-30: the clocks go from 02:00 to 03:00 (01:00Z).
    assert ticks("every day at 2:30am Europe/Paris", "2025-03-29 12:00:00") == [
        "2025-03-30 01:00:00",
        "2025-03-31 00:30:00",
        "2025-04-01 00:30:00",
    ]


def test_a_fixed_time_fires_once_when_the_autumn_change_repeats_it():
    # 02:30 happens twice in Paris on 2025-10-26 (00:30Z and 01:30Z): only the first counts.
    assert ticks("every day at 2:30am Europe/Paris", "2025-10-25 12:00:00") == [
        "2025-10-26 00:30:00",
        "2025-10-27 01:30:00",
        "2025-10-28 01:30:00",
    ]
    assert Schedule.parse("every day at 2:30am Europe/Paris").previous_time(
        at("2025-10-26 12:00:00")
    ) == at("2025-10-26 00:30:00")


def test_an_interval_keeps_its_pace_through_both_daylight_saving_changes():
    assert ticks("every 30 minutes Europe/Paris", "2025-10-25 23:45:00", 6) == [
        "2025-10-26 00:00:00",
        "2025-10-26 00:30:00",
        "2025-10-26 01:00:00",
        "2025-10-26 01:30:00",
        "2025-10-26 02:00:00",
        "2025-10-26 02:30:00",
    ]
    assert ticks("every hour Europe/Paris", "2025-03-29 23:30:00", 4) == [
        "2025-03-30 00:00:00",
        "2025-03-30 01:00:00",
        "2025-03-30 02:00:00",
        "2025-03-30 03:00:00",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "whenever",
        "every fortnight",
        "every 7 minutes",
        "every 0 minutes",
        "every 45 seconds",
        "every 5 hours",
        "every 5 days",
        "every day at 13pm",
        "every day at 0am",
        "every day at 24:00",
        "every day at 9:60",
        "every hour at minute 60",
        "every month on day 32",
        "every month on day 0",
        "every day at 9am Mars/Olympus_Mons",
        "every day at 9am PST8",
        "* * *",
        "* * * * * * *",
        "61 * * * *",
        "R * * * *",
        "H * * * *",
        "0 0 31 2 *",
    ],
)
def test_anything_else_is_refused_with_the_text_quoted_and_the_accepted_forms(text):
    with pytest.raises(ValueError, match=re.escape(repr(text))) as raised:
        Schedule.parse(text)

    assert "every N minutes" in str(raised.value)
    assert "Europe/Paris" in str(raised.value)


def test_a_schedule_that_is_not_a_string_is_a_type_error():
    with pytest.raises(TypeError, match="must be a string"):
        Schedule.parse(60)  # type: ignore[arg-type]


SCHEDULES = [
    "every 15 seconds",
    "*/7 * * * *",
    "every hour at minute 27 America/New_York",
    "every day at 2:30am Europe/Paris",
    "every 30 minutes Europe/Paris",
    "0 9 * * 1-5 Australia/Lord_Howe",
    "every month on the 31st Asia/Kolkata",
]


@settings(max_examples=300, deadline=None)
@given(
    text=st.sampled_from(SCHEDULES),
    moment=st.datetimes(
        min_value=dt.datetime(2020, 1, 1), max_value=dt.datetime(2030, 1, 1), timezones=st.just(UTC)
    ),
)
def test_next_time_after_is_the_first_tick_after_the_moment(text, moment):
    schedule = Schedule.parse(text)

    tick = schedule.next_time_after(moment)

    assert tick > moment
    assert tick.tzinfo is UTC
    assert schedule.previous_time(tick) == tick
    assert schedule.previous_time(tick - dt.timedelta(microseconds=1)) <= moment
