"""Retrying deadlocks: full-jitter pauses that grow to a cap, and how many tries are made."""

from __future__ import annotations

import inspect
import pathlib
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.controls.coalesce import coalesce_admission
from flask_solidq.operations import claim
from flask_solidq.operations import finalize
from flask_solidq.storage import db


class DriverError(Exception):
    """A driver's error, as PyMySQL raises it: the MySQL error code first."""


def deadlock() -> sa.exc.OperationalError:
    return sa.exc.OperationalError("DELETE ...", {}, DriverError(1213, "Deadlock found"))


def failing(times: int, error: Exception) -> tuple[list[int], t.Callable[[], str]]:
    """An operation that raises ``error`` its first ``times`` calls, then returns "done"."""
    calls: list[int] = []

    def operation() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "done"

    return calls, operation


@pytest.fixture(autouse=True)
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db, "DEADLOCK_BACKOFF_CAP", 0.001)


def test_each_pause_is_drawn_below_a_bound_that_doubles_up_to_the_cap(monkeypatch):
    monkeypatch.setattr(db, "DEADLOCK_BACKOFF_CAP", 0.25)
    for attempt, bound in [(1, 0.005), (2, 0.01), (3, 0.02), (6, 0.16), (7, 0.25), (30, 0.25)]:
        pauses = [db.deadlock_pause(attempt) for _ in range(200)]
        assert all(0 <= pause <= bound for pause in pauses), attempt
        assert max(pauses) > bound / 2, attempt  # drawn over the range, not fixed


def test_a_claim_is_tried_ten_times_before_its_deadlock_is_raised():
    calls, operation = failing(claim.DEADLOCK_RETRIES - 1, deadlock())
    assert db.retrying_deadlocks(operation, attempts=claim.DEADLOCK_RETRIES) == "done"
    assert len(calls) == 10

    calls, operation = failing(claim.DEADLOCK_RETRIES, deadlock())
    with pytest.raises(sa.exc.OperationalError):
        db.retrying_deadlocks(operation, attempts=claim.DEADLOCK_RETRIES)
    assert len(calls) == 10


def test_an_error_that_is_not_a_deadlock_is_raised_at_once():
    error = sa.exc.OperationalError("DELETE ...", {}, DriverError(1146, "Table doesn't exist"))
    calls, operation = failing(1, error)
    with pytest.raises(sa.exc.OperationalError):
        db.retrying_deadlocks(operation, attempts=10)
    assert len(calls) == 1


def test_the_docs_give_each_writer_the_number_of_tries_the_code_makes():
    """The docs' "Coalescing rules and limitations" (docs/coalescing.md, once the README's)
    names the tries (issue 19, item 10: it said 3 where the code made 10)."""
    page = pathlib.Path(__file__).parents[2] / "docs" / "coalescing.md"
    readme = " ".join(page.read_text().split())
    plain = inspect.signature(db.retrying_deadlocks).parameters["attempts"].default
    assert f"a coalesced call up to {coalesce_admission.DEADLOCK_ATTEMPTS} times in all" in readme
    assert f"(a plain enqueue, single or bulk, up to {plain} times)" in readme
    assert f"key up to {claim.DEADLOCK_RETRIES} times" in readme
    assert f"the finisher's batch up to {finalize.DEADLOCK_ATTEMPTS}," in readme
