"""The dashboard's one refresh interval (:mod:`flask_solidq.dashboard.live`): the ``hx-trigger``
it renders, and the setting refused at start when it isn't a duration."""

from __future__ import annotations

import datetime as dt

import pytest

from flask_solidq.dashboard import live


@pytest.mark.parametrize(
    ("seconds", "trigger"),
    [(3, "every 3s"), (10.0, "every 10s"), (0.2, "every 200ms"), (1.5, "every 1500ms")],
)
def test_the_trigger_says_whole_seconds_or_milliseconds(seconds, trigger):
    assert live.trigger(seconds) == trigger


def test_a_tiny_interval_still_waits_a_millisecond():
    assert live.trigger(0.0001) == "every 1ms"


@pytest.mark.parametrize("value", [3, 0.5, dt.timedelta(seconds=2)])
def test_a_duration_is_accepted(value):
    live.check_setting({live.SETTING: value})


def test_no_setting_is_the_default():
    live.check_setting({})


@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), (-1, ValueError), ("3", TypeError), (True, TypeError)]
)
def test_anything_else_is_refused_naming_the_setting(value, error):
    with pytest.raises(error, match=live.SETTING):
        live.check_setting({live.SETTING: value})
