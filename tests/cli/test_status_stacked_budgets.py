"""``flask solidq status``'s "Rate-limited jobs" table under stacked limits
(``limits_rate(name=)``) and limits counted in units (``limits_rate(cost=)``), on every
backend, with real claims of :mod:`tests.jobs.rate_limit_stacked`'s jobs.

Deferred jobs are counted on their main budget (their ``rate_limit_key``) whichever budget
refused them, so the table lists each other budget of theirs under it, indented, with its own
limit: the one holding them back may be any. A limit of units says units where a count is
shown.
"""

from __future__ import annotations

import re

from flask_solidq.operations import claim
from tests import support
from tests.jobs import rate_limit_stacked as jobs

HEADERS = ["KEY", "LIMIT", "AVAILABLE", "DEFERRED", "NEXT ADMISSION", "NEXT SLOT"]
PROCESS_ID = 4646


def later(app, definition, *args) -> None:
    with app.app_context():
        definition.perform_later(*args)


def claim_all(engine) -> claim.ClaimBatch:
    return support.claim_everything(engine, PROCESS_ID)


def budget_table(app) -> list[list[str]]:
    """The "Rate-limited jobs" table, its cells split on the two spaces between columns (a
    stacked budget keeps its indent)."""
    result = app.test_cli_runner().invoke(args=["solidq", "status"])
    assert result.exit_code == 0, result.output
    section = result.output.split("Rate-limited jobs\n", 1)[1].split("\n\n", 1)[0]
    lines = [line.removeprefix("  ") for line in section.rstrip().splitlines()]
    table = [re.split(r"(?<=\S)\s{2,}", line) for line in lines]
    assert table[0] == HEADERS
    return table[1:]


def test_a_job_deferred_by_its_stacked_budget_shows_that_budget_under_its_main_one(app, engine):
    # Ten a second, one an hour: the second call is refused by the hourly budget alone.
    for note in ("admitted", "deferred"):
        later(app, jobs.hourly_tight, note)
    batch = claim_all(engine)
    assert (len(batch.jobs), len(batch.deferrals)) == (1, 1)
    assert batch.deferrals[0].key == "stacked_test.hourly_tight/hourly/global"

    main, hourly = budget_table(app)

    assert main[:4] == ["stacked_test.hourly_tight/global", "10 per 1s, burst 10", "9", "1"]
    # The main budget admits a new claim now, but its deferred job waits for its slot: more
    # than MAX_AHEAD (5 minutes) away, so it is due again in 5 minutes, and admitted no sooner.
    assert re.fullmatch(r"in (4m5\ds|5m00s)", main[5]), main
    assert main[4] == main[5]
    assert hourly[:4] == [
        "  stacked_test.hourly_tight/hourly/global",
        "hourly: 1 per 1h00m",
        "0",
        "-",
    ]
    assert re.fullmatch(r"in (59m5\ds|1h00m)", hourly[4]), hourly
    assert hourly[5] == "-"


def test_a_budget_of_units_shows_its_limit_and_what_it_admits_in_units(app, engine):
    later(app, jobs.tokens, 80)
    later(app, jobs.tokens, 50)  # 20 units left: refused
    batch = claim_all(engine)
    assert (len(batch.jobs), len(batch.deferrals)) == (1, 1)

    (row,) = budget_table(app)

    assert row[:4] == [
        "stacked_test.tokens/openai",
        "100 units per 1m00s, burst 100",
        "20 units",
        "1",
    ]
    # A unit is available now, for a new claim; the call of 50 waits for its slot.
    assert row[5].startswith("in ")
    assert row[4] == row[5]


def test_stacked_budgets_of_claims_and_of_units_each_say_their_own_count(app, engine):
    for points in (30, 30):  # 20 points left after the first: the second call is refused
        later(app, jobs.points_and_calls, points)
    batch = claim_all(engine)
    assert (len(batch.jobs), len(batch.deferrals)) == (1, 1)

    main, points = budget_table(app)

    assert main[:4] == ["stacked_test.points_and_calls/shop", "4 per 1m00s, burst 4", "3", "1"]
    assert points[:4] == [
        "  stacked_test.points_and_calls/points/shop",
        "points: 50 units per 1m00s, burst 50",
        "20 units",
        "-",
    ]
