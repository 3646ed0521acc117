"""The debounce rules on their own (flask_solidq.controls.coalesce.coalesce_timing): when a
coalesced call wants its job to come due, how ``max_wait`` caps it, and when a job moves (seed 003,
"Debouncing"). No database: the admission that applies them is tested in
tests/controls/coalesce/test_coalesce_debounce.py."""

from __future__ import annotations

import datetime as dt
import typing as t

from flask_solidq.controls.coalesce import Coalesce
from flask_solidq.controls.coalesce import OnConflict
from flask_solidq.controls.coalesce import coalesce
from flask_solidq.controls.coalesce import coalesce_timing as timing
from flask_solidq.definitions.declared import DeclaredAttributes

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def seconds(value: float) -> dt.timedelta:
    return dt.timedelta(seconds=value)


def declared(**options: object) -> Coalesce:
    """The declaration ``coalesce(key="k", **options)`` gives a throwaway job class."""

    class Throwaway(DeclaredAttributes):
        pass

    coalesce(key="k", **options)(Throwaway)
    return t.cast(Coalesce, Throwaway._coalesce)


PLAIN = declared()
DEBOUNCED = declared(debounce=30)
CAPPED = declared(debounce=30, max_wait=40)


# Rules 1 and 2: the call's own time.


def test_a_plain_call_without_debounce_asks_for_no_time():
    assert timing.wanted(PLAIN, None, False, NOW) is None


def test_a_plain_call_on_a_debounced_definition_asks_for_now_plus_the_window():
    assert timing.wanted(DEBOUNCED, None, False, NOW) == NOW + seconds(30)
    assert timing.wanted(declared(debounce=dt.timedelta(minutes=2)), None, False, NOW) == (
        NOW + seconds(120)
    )


def test_set_wait_or_wait_until_replaces_the_window_for_that_call():
    for declaration in (PLAIN, DEBOUNCED, CAPPED):
        assert timing.wanted(declaration, NOW + seconds(5), True, NOW) == NOW + seconds(5)
        assert timing.wanted(declaration, NOW + seconds(120), True, NOW) == NOW + seconds(120)


def test_set_wait_zero_asks_for_now_rather_than_the_window():
    # set(wait=0) leaves no scheduled time on the job, but the call did set a wait.
    assert timing.wanted(DEBOUNCED, None, True, NOW) == NOW
    assert timing.wanted(PLAIN, None, True, NOW) == NOW


# Rule 3: max_wait caps both.


def test_a_creating_call_cannot_ask_for_more_than_max_wait_from_now():
    assert timing.for_new_job(CAPPED, NOW + seconds(50), NOW) == NOW + seconds(40)
    assert timing.for_new_job(CAPPED, NOW + seconds(3600), NOW) == NOW + seconds(40)


def test_a_creating_call_within_max_wait_keeps_its_time():
    assert timing.for_new_job(CAPPED, NOW + seconds(30), NOW) == NOW + seconds(30)
    assert timing.for_new_job(CAPPED, NOW, NOW) == NOW


def test_without_max_wait_a_creating_call_keeps_any_time_and_a_plain_one_stays_due_now():
    assert timing.for_new_job(DEBOUNCED, NOW + seconds(3600), NOW) == NOW + seconds(3600)
    assert timing.for_new_job(PLAIN, NOW + seconds(3600), NOW) == NOW + seconds(3600)
    assert timing.for_new_job(CAPPED, None, NOW) is None


def test_a_joining_call_cannot_move_the_job_past_max_wait_from_when_it_opened():
    opened = NOW - seconds(35)
    # C asks for now + 30, the job opened 35 s ago: held to 5 s from now.
    assert timing.for_joined_job(CAPPED, NOW + seconds(30), opened) == NOW + seconds(5)


def test_the_join_cap_counts_from_the_opening_not_from_the_call():
    opened = NOW - seconds(10)
    assert timing.for_joined_job(CAPPED, NOW + seconds(30), opened) == NOW + seconds(30)
    assert timing.for_joined_job(CAPPED, NOW + seconds(31), opened) == NOW + seconds(30)


def test_without_debounce_a_joining_call_never_moves_its_job():
    # The first call wins: "Calls that join don't move it, even if they asked for a later time."
    assert timing.for_joined_job(PLAIN, NOW + seconds(120), NOW - seconds(10)) is None


def test_without_max_wait_a_joining_call_moves_to_the_time_it_asks_for():
    opened = NOW - seconds(3600)
    assert timing.for_joined_job(DEBOUNCED, NOW + seconds(30), opened) == NOW + seconds(30)


def test_a_joining_call_that_asks_for_no_time_does_not_move_its_job():
    assert timing.for_joined_job(CAPPED, None, NOW) is None


# A job only moves later, by more than a second.


def test_a_job_only_moves_later_never_earlier():
    current = NOW + seconds(30)
    assert timing.moves(current, NOW + seconds(45))
    assert not timing.moves(current, NOW + seconds(5))
    assert not timing.moves(current, NOW)
    assert not timing.moves(current, None)


def test_a_move_must_be_more_than_one_second_later():
    current = NOW + seconds(30)
    assert not timing.moves(current, current)
    assert not timing.moves(current, current + seconds(0.5))
    assert not timing.moves(current, current + seconds(1))
    assert timing.moves(current, current + seconds(1) + dt.timedelta(microseconds=1))
    assert timing.moves(current, current + seconds(1.5))


# Bulk: one admission moves a job once, to the latest time among its calls.


def test_several_calls_of_one_admission_take_the_latest_time_among_them():
    times = [NOW + seconds(5), None, NOW + seconds(25), NOW + seconds(15)]
    assert timing.latest(times) == NOW + seconds(25)


def test_an_admission_whose_calls_ask_for_no_time_has_none():
    assert timing.latest([None, None]) is None
    assert timing.latest([]) is None


# The seed's timelines, as the rules compute them: calls at 0, 10 and 20 seconds.


def _debounce_timeline(declaration: Coalesce) -> list[dt.datetime]:
    """The job's time after each of A, B and C, calls without a wait of their own."""
    opened = NOW
    due = timing.for_new_job(declaration, timing.wanted(declaration, None, False, opened), opened)
    assert due is not None
    history = [due]
    for at in (NOW + seconds(10), NOW + seconds(20)):
        target = timing.for_joined_job(
            declaration, timing.wanted(declaration, None, False, at), opened
        )
        if target is not None and timing.moves(due, target):
            due = target
        history.append(due)
    return history


def test_the_debounce_timeline_comes_due_30_seconds_after_the_last_call():
    assert _debounce_timeline(DEBOUNCED) == [
        NOW + seconds(30),
        NOW + seconds(40),
        NOW + seconds(50),
    ]


def test_the_capped_timeline_holds_c_to_40_seconds():
    assert _debounce_timeline(CAPPED) == [NOW + seconds(30), NOW + seconds(40), NOW + seconds(40)]


def test_a_declaration_built_directly_follows_the_same_rules():
    direct = Coalesce(
        key="k",
        on_conflict=OnConflict.DISCARD,
        max_calls=None,
        on_full=None,
        debounce=30.0,
        max_wait=40.0,
    )
    assert timing.wanted(direct, None, False, NOW) == NOW + seconds(30)
    assert timing.for_new_job(direct, NOW + seconds(90), NOW) == NOW + seconds(40)
    assert timing.for_joined_job(direct, NOW + seconds(90), NOW - seconds(20)) == (
        NOW + seconds(20)
    )
