"""A batch callback is checked as ``solidq.batch()`` opens: one that can't take the batch as
its first argument (then its own) is refused with a message that says so and how to fix it,
before anything is written."""

from __future__ import annotations

import typing as t

import pytest

from flask_solidq import models
from tests import support
from tests.jobs import batch as batch_jobs
from tests.support import solidq

BATCHES = models.BatchRecord.__table__


@solidq.job(name="batch_signature_test.no_batch")
def no_batch() -> None:
    """A callback written without a parameter for the batch."""


@solidq.job(name="batch_signature_test.own_only")
def own_only(catalog_id: int) -> None:
    """A callback that takes its own argument but not the batch."""


@solidq.job(name="batch_signature_test.batch_and_own")
def batch_and_own(batch: t.Any, catalog_id: int) -> None:
    """A callback written right, called without its own argument."""


@pytest.mark.parametrize(
    ("kind", "callback", "fix"),
    [
        ("on_finish", lambda: no_batch, "give it a first parameter for the batch: no_batch(batch)"),
        (
            "on_success",
            lambda: own_only.new(7),
            "give it a first parameter for the batch: own_only(batch, catalog_id)",
        ),
        (
            "on_failure",
            lambda: batch_and_own,
            "pass the arguments after the batch with .new(...), e.g."
            " solidq.batch(on_failure=batch_and_own.new(...))",
        ),
    ],
)
def test_a_callback_that_cant_take_the_batch_first_is_refused_saying_so(
    app, engine, kind, callback, fix
):
    with app.app_context(), pytest.raises(TypeError) as refused:
        with solidq.batch(**{kind: callback()}):
            raise AssertionError("the block must not open")
    message = str(refused.value)
    assert message.startswith(f"solidq.batch({kind}=...): a batch callback is called with the")
    assert "the batch as its first argument, then its own" in message
    assert fix in message
    assert support.count(engine, BATCHES) == 0


def test_a_callback_taking_the_batch_then_its_own_arguments_is_accepted(app, engine):
    with app.app_context():
        with solidq.batch(on_finish=batch_and_own.new(7), on_success=batch_jobs.callback):
            pass
    assert support.count(engine, BATCHES) == 1
