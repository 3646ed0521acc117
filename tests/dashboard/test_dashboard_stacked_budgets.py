"""The budgets page of stacked limits (``limits_rate(name=)``) and of limits counted in units
(``limits_rate(cost=)``), with the test client on every backend: each budget is read by its
own limit and shows that limit's name, and a limit of units says units wherever a count is
shown (its row's limit and what it admits now, its admissions chart's axis and caption).

The jobs are :mod:`tests.jobs.rate_limit_stacked`'s; the claims are real.
"""

from __future__ import annotations

import datetime as dt
import re
import typing as t

import pytest

from flask_solidq.controls import rate_limit
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import gcra
from flask_solidq.controls.rate_limit.available import admits_available
from flask_solidq.dashboard import control_views
from flask_solidq.reads import control_reads
from flask_solidq.timing import utcnow
from tests.dashboard import test_dashboard_control_pages as pages
from tests.dashboard.test_dashboard_control_pages import claim_all
from tests.dashboard.test_dashboard_control_pages import later
from tests.dashboard.test_dashboard_control_pages import page_text
from tests.dashboard.test_dashboard_control_pages import tables
from tests.jobs import rate_limit_stacked as jobs

#: The control pages' fixtures: an app with the dashboard open, and its test client.
app = pages.app
client = pages.client

MINUTELY = "stacked_test.minutely_hourly/global"
HOURLY = "stacked_test.minutely_hourly/hourly/global"
TOKENS = "stacked_test.tokens/openai"
CALLS = "stacked_test.points_and_calls/shop"
POINTS = "stacked_test.points_and_calls/points/shop"


def budget_rows(client) -> dict[str, dict[str, str]]:
    (budgets_table,) = tables(client, "/solidq/budgets")
    return {row["Key"]: row for row in budgets_table}


def test_each_stacked_budget_is_a_row_read_by_its_own_limit_and_named(app, engine, client):
    for note in ("admitted", "deferred"):
        later(app, jobs.minutely_hourly, note)
    batch = claim_all(engine)
    assert (len(batch.jobs), len(batch.deferrals)) == (1, 1)

    rows = budget_rows(client)

    assert set(rows) == {MINUTELY, HOURLY}
    main, hourly = rows[MINUTELY], rows[HOURLY]
    assert main["Limit"] == "1 per 1m00s"
    # The deferred job is counted on its main budget (its rate_limit_key).
    assert re.fullmatch(
        r"Draining 1 deferred job one slot at a time: the next is admitted in .+\.", main["Now"]
    )
    assert main["Deferred"] == "1"
    # The hourly budget: five an hour, one of them charged by the admitted claim.
    assert hourly["Limit"] == "hourly: 5 per 1h00m, burst 5"
    assert hourly["Now"] == "Open: admits 4 claims now."
    assert (hourly["Deferred"], hourly["Next slot"]) == ("0", "-")


def test_a_limit_counted_in_units_says_units_in_its_row(app, engine, client):
    later(app, jobs.tokens, 30)
    assert len(claim_all(engine).jobs) == 1

    row = budget_rows(client)[TOKENS]

    assert row["Limit"] == "100 units per 1m00s, burst 100"
    assert row["Now"] == "Open: admits 70 units now."


def test_a_spent_budget_of_units_says_when_its_next_unit_comes(app, engine, client):
    later(app, jobs.tokens, 100)
    assert len(claim_all(engine).jobs) == 1

    row = budget_rows(client)[TOKENS]

    # burst = to: the quota spent at once refills a unit a minute.
    assert re.fullmatch(r"Spent: admits the next unit in (5\ds|1m00s)\.", row["Now"]), row


def test_stacked_limits_of_claims_and_of_units_each_say_their_own_count(app, engine, client):
    later(app, jobs.points_and_calls, 20)
    assert len(claim_all(engine).jobs) == 1

    rows = budget_rows(client)

    assert rows[CALLS]["Limit"] == "4 per 1m00s, burst 4"
    assert rows[CALLS]["Now"] == "Open: admits 3 claims now."
    assert rows[POINTS]["Limit"] == "points: 50 units per 1m00s, burst 50"
    assert rows[POINTS]["Now"] == "Open: admits 30 units now."


def test_the_admissions_chart_of_a_limit_of_units_counts_units_per_second(app, engine, client):
    later(app, jobs.points_and_calls, 20)
    assert len(claim_all(engine).jobs) == 1

    text = page_text(client, "/solidq/budgets")

    captions = dict(
        re.findall(r"<figcaption><code>([^<]+)</code>:(.*?)</figcaption>", text, re.DOTALL)
    )
    words = {
        key: " ".join(re.sub(r"<[^>]+>", " ", caption).split()) for key, caption in captions.items()
    }
    assert words[POINTS] == "20 units admitted limit 0.833 units/s"
    assert words[CALLS] == "1 admitted limit 0.0667/s"
    assert (
        f'aria-label="Units admitted per second of {POINTS} over the last 3 minutes: 20 in all;'
        ' limit 0.833333 units per second"'
    ) in text
    assert (
        f'aria-label="Admissions per second of {CALLS} over the last 3 minutes: 1 in all;'
        ' limit 0.0666667 per second"'
    ) in text
    y_titles = re.findall(r'<text class="axis-title y-title"[^>]*>([^<]+)</text>', text)
    assert sorted(y_titles) == ["Admitted per second", "Units admitted per second"]


@pytest.mark.parametrize(
    ("available", "waiting", "due_in", "said"),
    [
        (1, 0, 0, "Open: admits 1 unit now."),
        (90, 0, 0, "Open: admits 90 units now."),
        (0, 0, 0, "Spent: admits the next unit in 5s."),
        (
            40,
            3,
            2,
            "Draining 3 deferred jobs one slot at a time: the next is admitted in 2s;"
            " 40 units free now for a new claim.",
        ),
        (
            0,
            1,
            -1,
            "1 deferred job due: each is admitted, or deferred again, when a worker claims it.",
        ),
    ],
)
def test_a_budget_of_units_says_what_it_is_doing_in_units(available, waiting, due_in, said):
    now = utcnow()
    outlook = control_reads.BudgetOutlook(
        limit=t.cast(t.Any, None),
        available=available,
        # Free now: a claim now is admitted; spent: the next in 5 s.
        next_admission_at=now + dt.timedelta(seconds=0 if available else 5),
        counts_units=True,
    )
    queued = budgets.Waiting("k", waiting, now + dt.timedelta(seconds=due_in)) if waiting else None

    assert control_views.describe_budget(outlook, queued, now) == said


def test_each_stacked_budget_is_found_with_its_own_declaration(app):
    with app.app_context():
        for key, name in [(MINUTELY, None), (HOURLY, "hourly"), (CALLS, None), (POINTS, "points")]:
            declaration = rate_limit.declaration_for(key)
            assert declaration is not None and declaration.name == name, key
        # A shared group's named budgets: the group, then the name.
        daily = rate_limit.declaration_for(f"{jobs.SHOP}/daily/acme")
        assert daily is not None and (daily.name, daily.to) == ("daily", 3)
        main = rate_limit.declaration_for(f"{jobs.SHOP}/acme")
        assert main is not None and (main.name, main.to) == (None, 2)


def test_a_limit_in_words_names_a_stacked_limit_and_says_units():
    with_units = rate_limit.RateLimit(
        to=90, per=60.0, burst=30, key="k", group=None, name="tokens", cost=lambda n: n
    )
    assert with_units.in_words() == "tokens: 90 units per 1m00s, burst 30"
    fixed_cost = rate_limit.RateLimit(to=10, per=0.5, burst=1, key="k", group=None, cost=1)
    assert fixed_cost.in_words() == "10 per 0.5s"


@pytest.mark.parametrize("burst", [2, 5])
def test_the_units_available_are_the_largest_call_the_budget_admits_now(burst):
    rate = gcra.Rate.of(10, 10, burst)
    now = dt.datetime(2030, 1, 1)
    for tat in (None, now - dt.timedelta(hours=1), now, now + 2 * rate.interval):
        for shift in (dt.timedelta(0), dt.timedelta(microseconds=1), rate.interval / 2):
            budget = gcra.Budget(tat if tat is None else tat + shift)
            available = admits_available(budget, rate, now)
            admitted = [
                units
                for units in range(1, burst + 1)
                if gcra.Budget(budget.tat).admit(rate, now, units)
            ]
            assert available == max(admitted, default=0), (tat, shift)
