"""A budget's ring of recent admissions (:mod:`flask_solidq.controls.rate_limit.admission_ring`):
what it records, what it forgets, and the text it is stored as."""

from __future__ import annotations

import datetime as dt
import random

from flask_solidq.controls.rate_limit import admission_ring as ring
from flask_solidq.controls.rate_limit import gcra

NOON = dt.datetime(2026, 1, 1, 12, 0, 0)
NOON_SECOND = 1767268800  # Unix time of NOON
SECOND = dt.timedelta(seconds=1)


def record_all(times: list[dt.datetime], start: str | None = None) -> str | None:
    text = start
    for at in times:
        text = ring.record(text, at)
    return text


def test_admissions_count_in_their_seconds_newest_first_zeros_left_blank():
    text = record_all([NOON] * 5 + [NOON + 0.5 * SECOND, NOON + 3 * SECOND])

    assert text == f"{NOON_SECOND + 3}:1,,,6"
    assert ring.per_second(text, NOON + 4 * SECOND, seconds=6) == [0, 6, 0, 0, 1, 0]


def test_an_aware_time_counts_in_its_utc_second():
    aware = (NOON + SECOND).replace(tzinfo=dt.timezone(dt.timedelta(hours=2))) + dt.timedelta(
        hours=2
    )
    assert ring.second_of(aware) == NOON_SECOND + 1


def test_the_ring_forgets_seconds_older_than_it_remembers():
    text = record_all([NOON, NOON + (ring.SECONDS - 1) * SECOND])
    assert ring.parse(text)[1][-1] == 1  # the oldest second it keeps

    later = ring.record(text, NOON + ring.SECONDS * SECOND)
    assert later == f"{NOON_SECOND + ring.SECONDS}:1,1"
    assert ring.record(None, NOON + 10 * ring.SECONDS * SECOND) == (
        f"{NOON_SECOND + 10 * ring.SECONDS}:1"
    )


def test_a_second_before_the_newest_counts_where_it_belongs_or_is_dropped():
    text = record_all([NOON + 10 * SECOND, NOON + 8 * SECOND])
    assert text == f"{NOON_SECOND + 10}:1,,1"
    assert ring.record(text, NOON - ring.SECONDS * SECOND) == text


def test_no_ring_or_a_broken_one_reads_as_nothing_recorded():
    assert ring.per_second(None, NOON, seconds=3) == [0, 0, 0]
    assert ring.parse("garbage") == (0, [])
    assert ring.record("12:x", NOON) == f"{NOON_SECOND}:1"


def test_a_busy_ring_stays_a_few_hundred_characters():
    text = record_all([NOON + index * SECOND for index in range(ring.SECONDS) for _ in range(40)])
    assert text is not None and len(text) < 4 * ring.SECONDS
    assert sum(ring.per_second(text, NOON + ring.SECONDS * SECOND)) == 40 * (ring.SECONDS - 1)


def test_a_budget_records_what_it_admits_and_not_what_it_refuses():
    rate = gcra.Rate.of(to=3, per=60, burst=3)
    budget = gcra.Budget()

    admitted = [budget.admit(rate, NOON) for _ in range(5)]

    assert admitted == [True, True, True, False, False]
    assert budget.ring() == f"{NOON_SECOND}:3"
    assert budget.admissions is None  # as stored: the claim saves ring()


def test_a_claims_admissions_are_added_to_the_stored_ring_at_once():
    stored = f"{NOON_SECOND}:2"
    budget = gcra.Budget(admissions=stored)
    rate = gcra.Rate.of(to=10, per=1, burst=10)

    for _ in range(3):
        budget.admit(rate, NOON + 2 * SECOND)

    assert budget.ring() == f"{NOON_SECOND + 2}:3,,2"
    assert ring.record_all(stored, []) == stored


def _reference(text: str | None, second: int, count: int) -> str | None:
    """The ring arithmetic on parsed counts, as the general path does it."""
    newest, counts = ring.parse(text)
    if second > newest:
        gap = second - newest
        counts = [0] * ring.SECONDS if gap >= ring.SECONDS else [0] * gap + counts
        newest = second
    counts = (counts + [0] * ring.SECONDS)[: ring.SECONDS]
    if 0 <= newest - second < ring.SECONDS:
        counts[newest - second] += count
    return ring.dump(newest, counts)


def test_a_claim_of_one_second_edits_the_text_as_the_counts_would_change():
    """The claim's fast path (one second, the ring's newest or later, edited as text) gives
    the ring the general path would, over random steps: same second, the next ones, gaps that
    push counts out of the 180 seconds, older seconds."""
    rng = random.Random(20261202)
    for _trial in range(300):
        text: str | None = None
        second = NOON_SECOND
        for _step in range(rng.randint(1, 300)):
            second += rng.choice([0, 0, 1, 1, 2, 7, 179, 180, 181, 500, -1, -200])
            count = rng.randint(1, 9)
            expected = _reference(text, second, count)
            text = ring.record_seconds(text, {second: count})
            assert text == expected
