"""A budget's ring of recent admissions on every backend: the claim that admits jobs records
them, in its second, in the UPDATE it already makes to the budget's row (the statement-count
tests of :mod:`tests.controls.rate_limit.test_rate_limit_claims` pin that no statement was added),
and the budgets page draws them against the limit."""

from __future__ import annotations

import re
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import limits_rate
from flask_solidq import models
from flask_solidq.controls.rate_limit import admission_ring
from flask_solidq.operations import claim
from tests import support
from tests.support import solidq

if t.TYPE_CHECKING:
    from flask import Flask

BUDGETS = t.cast(sa.Table, models.RateLimitBudget.__table__)
PROCESS_ID = 4747
#: Registered by conftest's ``claimers``.
CLAIMERS = (PROCESS_ID,)
KEY = "ring_test.burst/global"


@solidq.job(name="ring_test.burst")
@limits_rate(to=5, per=60, burst=5, key="global")
def burst(note: object = None) -> None:
    """Five claims at once, then one every 12 s."""


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


def enqueue(app: Flask, count: int) -> None:
    with app.app_context():
        for index in range(count):
            burst.perform_later(index)


def claim_all(engine: sa.Engine) -> claim.ClaimBatch:
    return claim.claim_batch(engine, claim.QueueSelector(("*",)), 20, PROCESS_ID)


def budget_row(engine: sa.Engine) -> t.Any:
    (row,) = support.rows(engine, BUDGETS, BUDGETS.c.key == KEY)
    return row


def test_five_admissions_of_one_claim_count_five_in_its_second(app, engine):
    enqueue(app, 7)

    batch = claim_all(engine)

    assert (len(batch.jobs), len(batch.deferrals)) == (5, 2)
    row = budget_row(engine)
    # The claim stamped the row with the time it admitted at: the ring's second is that one.
    assert row.admissions == f"{admission_ring.second_of(row.updated_at)}:5"
    assert admission_ring.per_second(row.admissions, row.updated_at, seconds=3) == [0, 0, 5]


def test_a_claim_that_admits_nothing_leaves_the_ring_as_it_was(app, engine):
    enqueue(app, 5)
    claim_all(engine)
    before = budget_row(engine).admissions
    enqueue(app, 2)

    batch = claim_all(engine)

    assert (len(batch.jobs), len(batch.deferrals)) == (0, 2)
    assert budget_row(engine).admissions == before


def test_the_budgets_page_draws_the_admissions_against_the_limit(app, engine):
    enqueue(app, 6)
    claim_all(engine)

    text = app.test_client().get("/solidq/budgets").get_data(as_text=True)

    # The chart to its figure's end (its plot is an <svg> of its own inside).
    (svg,) = re.findall(r'<svg class="bars".*?</figure>', text, flags=re.S)
    assert (
        f'aria-label="Admissions per second of {KEY} over the last 3 minutes: 5 in all;'
        ' limit 0.0833333 per second"'
    ) in svg
    assert re.findall(r"UTC: (\d+) admitted</title>", svg) == ["5"]
    assert '<line class="limit"' in svg
    assert ">Admitted per second</text>" in svg and ">Time (UTC)</text>" in svg
