"""``solidq.rate_limiter`` on stacked limits (``limits_rate(name=)``) and limits counted in
units (``limits_rate(cost=)``), on every backend: each budget is read by its own limit,
``time_until_available(key, units=)`` says when a call of that many units is admitted, and
``state(key)`` tells what the budget admits now, in units for such a limit, and its limit's
name."""

from __future__ import annotations

import pytest

from flask_solidq.operations import claim
from tests import support
from tests.jobs import rate_limit_stacked as jobs

PROCESS_ID = 4747
TOKENS = "stacked_test.tokens/openai"


def later(app, definition, *args) -> None:
    with app.app_context():
        definition.perform_later(*args)


def claim_all(engine) -> claim.ClaimBatch:
    return support.claim_everything(engine, PROCESS_ID)


def test_time_until_available_takes_the_units_of_the_call(app, engine):
    later(app, jobs.tokens, 30)
    assert len(claim_all(engine).jobs) == 1
    limiter = support.solidq.rate_limiter

    with app.app_context():
        # 100 a minute, burst 100: 70 units left now, then one unit a minute.
        assert limiter.time_until_available(TOKENS) == 0.0
        assert limiter.time_until_available(TOKENS, units=70) == 0.0
        assert 59 < limiter.time_until_available(TOKENS, units=71) <= 60
        assert 119 < limiter.time_until_available(TOKENS, units=72) <= 120
        assert limiter.is_limited(TOKENS, units=70) is False
        assert limiter.is_limited(TOKENS, units=71) is True
        state = limiter.state(TOKENS)
    assert (state.available, state.counts_units, state.limit_name) == (70, True, None)
    assert state.limited is False


@pytest.mark.parametrize("units", [0, 101, 1.5, True])
def test_units_outside_one_to_the_burst_raise_value_error(app, engine, units):
    with app.app_context(), pytest.raises(ValueError, match="units must be"):
        support.solidq.rate_limiter.time_until_available(TOKENS, units=units)


def test_each_stacked_budget_is_read_by_its_own_limit(app, engine):
    later(app, jobs.points_and_calls, 20)
    assert len(claim_all(engine).jobs) == 1
    limiter = support.solidq.rate_limiter

    with app.app_context():
        calls = limiter.state("stacked_test.points_and_calls/shop")
        points = limiter.state("stacked_test.points_and_calls/points/shop")
        # Points: 30 left of a burst of 50; a call of 31 waits a minute per unit short.
        points_key = "stacked_test.points_and_calls/points/shop"
        assert limiter.time_until_available(points_key, units=30) == 0
        assert limiter.is_limited("stacked_test.points_and_calls/points/shop", units=31)
        # The calls' limit counts claims, burst 4: a "call of 5" is never admitted.
        with pytest.raises(ValueError, match="burst"):
            limiter.time_until_available("stacked_test.points_and_calls/shop", units=5)
    assert (calls.available, calls.counts_units, calls.limit_name) == (3, False, None)
    assert (points.available, points.counts_units, points.limit_name) == (30, True, "points")
