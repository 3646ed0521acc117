"""Enqueues check the arguments against the job's signature (``SOLIDQ_CHECK_ARGUMENTS``), on
every backend and under every adapter."""

from __future__ import annotations

import inspect
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import coalesce
from flask_solidq import models
from flask_solidq import testing
from flask_solidq.definitions import signatures
from tests import support
from tests.support import solidq

if t.TYPE_CHECKING:
    from flask import Flask

PERFORMED: list[tuple[t.Any, ...]] = []


@solidq.job(name="argument_check.send_email")
def send_email(user_id: int, template: str = "welcome", *, urgent: bool = False) -> None:
    PERFORMED.append((user_id, template, urgent))


@solidq.job(name="argument_check.anything")
def anything(*args: t.Any, **kwargs: t.Any) -> None:
    PERFORMED.append((args, kwargs))


@solidq.job(name="argument_check.positional_only")
def positional_only(first: int, /, second: int = 2) -> None:
    PERFORMED.append((first, second))


class SyncAccountJob(solidq.Job, name="argument_check.SyncAccountJob"):
    def perform(self, account_id: int, full: bool = False) -> None:
        PERFORMED.append((account_id, full))


class SyncAccountDeltaJob(SyncAccountJob, name="argument_check.SyncAccountDeltaJob"):
    def perform(self, account_id: int, since: str) -> None:  # type: ignore[override]
        PERFORMED.append((account_id, since))


class StaticPerformJob(solidq.Job, name="argument_check.StaticPerformJob"):
    @staticmethod
    def perform(value: int) -> None:  # type: ignore[override]
        PERFORMED.append((value,))


class FlexibleJob(solidq.Job, name="argument_check.FlexibleJob"):
    def perform(self, *args: t.Any, **kwargs: t.Any) -> None:
        PERFORMED.append((args, kwargs))


@solidq.job(name="argument_check.collect")
@coalesce(key=lambda *args, **kwargs: "all", on_conflict="collect")
def collect(calls: list[t.Any]) -> None:
    PERFORMED.append(tuple(call.args for call in calls))


@pytest.fixture(autouse=True)
def clear_performed() -> t.Iterator[None]:
    PERFORMED.clear()
    yield
    PERFORMED.clear()


def stored_jobs(engine: sa.Engine) -> int:
    return support.count(engine, models.JobRecord)


def stored_anything(engine: sa.Engine) -> list[int]:
    tables = (models.JobRecord, models.ReadyExecution, models.ScheduledExecution)
    return [support.count(engine, table) for table in tables]


# The function form.


def test_a_function_job_with_too_many_arguments_raises_at_enqueue_and_stores_nothing(app, engine):
    with pytest.raises(TypeError) as raised:
        send_email.perform_later(1, "welcome", "extra")

    message = str(raised.value)
    assert "'argument_check.send_email'" in message
    assert "too many positional arguments" in message
    assert "send_email(user_id, template='welcome', *, urgent=False)" in message
    assert "nothing was enqueued" in message
    assert stored_anything(engine) == [0, 0, 0]


def test_a_function_job_missing_a_required_argument_raises(app, engine):
    with pytest.raises(TypeError, match="missing a required argument: 'user_id'"):
        send_email.perform_later(template="reset")
    assert stored_jobs(engine) == 0


def test_an_unknown_keyword_raises(app, engine):
    with pytest.raises(TypeError, match="unexpected keyword argument 'templat'"):
        send_email.perform_later(1, templat="reset")
    assert stored_jobs(engine) == 0


def test_an_argument_given_twice_raises(app, engine):
    with pytest.raises(TypeError, match="multiple values for argument 'user_id'"):
        send_email.perform_later(1, user_id=2)
    assert stored_jobs(engine) == 0


def test_a_keyword_only_parameter_given_by_position_raises(app, engine):
    with pytest.raises(TypeError, match="too many positional arguments"):
        send_email.perform_later(1, "welcome", True)
    assert stored_jobs(engine) == 0


def test_a_positional_only_parameter_given_by_keyword_raises(app, engine):
    with pytest.raises(TypeError, match="'first' parameter is positional only"):
        positional_only.perform_later(first=1)
    positional_only.perform_later(1, second=3)
    assert stored_jobs(engine) == 1


def test_defaults_keywords_and_keyword_only_arguments_are_accepted(app, engine):
    send_email.perform_later(1)
    send_email.perform_later(2, "reset")
    send_email.perform_later(user_id=3, template="reset", urgent=True)
    assert stored_jobs(engine) == 3


def test_a_function_taking_args_and_kwargs_accepts_anything(app, engine):
    anything.perform_later()
    anything.perform_later(1, 2, 3, four=4)
    assert stored_jobs(engine) == 2


# The class form.


def test_a_class_job_binds_to_perform_without_self(app, engine):
    SyncAccountJob.perform_later(42)
    SyncAccountJob.perform_later(42, full=True)
    assert stored_jobs(engine) == 2

    with pytest.raises(TypeError) as raised:
        SyncAccountJob.perform_later(42, True, "extra")
    message = str(raised.value)
    assert "'argument_check.SyncAccountJob'" in message
    assert "SyncAccountJob.perform(account_id, full=False)" in message
    with pytest.raises(TypeError, match="missing a required argument: 'account_id'"):
        SyncAccountJob.perform_later()
    assert stored_jobs(engine) == 2


def test_a_subclass_binds_to_its_own_perform(app, engine):
    SyncAccountJob.perform_later(1)  # the parent's signature is read (and kept) first
    SyncAccountDeltaJob.perform_later(1, "2026-01-01")

    with pytest.raises(TypeError, match="missing a required argument: 'since'"):
        SyncAccountDeltaJob.perform_later(1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'since'"):
        SyncAccountJob.perform_later(1, since="2026-01-01")
    assert stored_jobs(engine) == 2


def test_a_static_perform_has_no_self_to_drop(app, engine):
    StaticPerformJob.perform_later(7)
    with pytest.raises(TypeError, match="missing a required argument: 'value'"):
        StaticPerformJob.perform_later()
    assert stored_jobs(engine) == 1


def test_a_class_whose_perform_takes_args_and_kwargs_accepts_anything(app, engine):
    FlexibleJob.perform_later()
    FlexibleJob.perform_later(1, two=2)
    assert stored_jobs(engine) == 2


def test_a_replaced_perform_is_read_again(app, engine, monkeypatch):
    SyncAccountJob.perform_later(1)

    def perform(self: t.Any, account_id: int, region: str) -> None: ...

    monkeypatch.setattr(SyncAccountJob, "perform", perform)
    with pytest.raises(TypeError, match="missing a required argument: 'region'"):
        SyncAccountJob.perform_later(1)
    SyncAccountJob.perform_later(1, "eu")
    assert stored_jobs(engine) == 2


# set(), new() and bulk enqueues.


def test_set_perform_later_checks_and_schedules_nothing(app, engine):
    with pytest.raises(TypeError, match="argument_check.send_email"):
        send_email.set(wait=30, queue="mail").perform_later()
    with pytest.raises(TypeError, match="argument_check.SyncAccountJob"):
        SyncAccountJob.set(wait=30).perform_later(1, 2, 3)
    assert stored_anything(engine) == [0, 0, 0]

    send_email.set(wait=30).perform_later(1)
    assert stored_anything(engine) == [1, 0, 1]


def test_a_job_built_with_new_is_checked_when_it_is_enqueued(app, engine):
    job = send_email.new(1, 2, 3, 4)  # building it is not an enqueue
    with pytest.raises(TypeError, match="too many positional arguments"):
        job.perform_later()
    with pytest.raises(TypeError, match="too many positional arguments"):
        SyncAccountJob.set(priority=3).new(1, 2, 3).perform_later()
    assert job.successfully_enqueued is None
    assert stored_jobs(engine) == 0


def test_perform_all_later_checks_every_job_before_storing_any(app, engine):
    batch = [
        send_email.new(1),
        SyncAccountJob.new(2),
        SyncAccountJob.new(3, full=True, fast=True),
        send_email.new(4),
    ]
    with pytest.raises(TypeError) as raised:
        solidq.perform_all_later(batch)

    message = str(raised.value)
    assert "'argument_check.SyncAccountJob' (at position 2)" in message
    assert "unexpected keyword argument 'fast'" in message
    assert stored_anything(engine) == [0, 0, 0]
    assert [job.successfully_enqueued for job in batch] == [None] * 4

    solidq.perform_all_later([send_email.new(1), SyncAccountJob.new(2)])
    assert stored_jobs(engine) == 2


def test_perform_after_commit_checks_at_the_call_not_after_the_commit(app, engine):
    with pytest.raises(TypeError, match="argument_check.send_email"):
        solidq.perform_after_commit(send_email.new())
    support.db.session.commit()
    assert stored_jobs(engine) == 0


def test_a_collecting_job_takes_any_arguments_for_its_calls(app, engine):
    first = collect.perform_later(1, "a")
    collect.perform_later(note="b")
    collect.perform_later()

    assert first.successfully_enqueued is True
    assert stored_jobs(engine) == 1
    assert support.count(engine, models.CoalescedCall) == 3


def test_the_check_runs_before_anything_else_looks_at_the_arguments(app, engine):
    """Serializing them (or a key computed from them) would otherwise fail first, with an
    error that hides the wrong call."""
    with pytest.raises(TypeError, match="argument_check.send_email"):
        send_email.perform_later(object(), "a", "b")  # unserializable, and too many
    assert stored_jobs(engine) == 0


# The setting.


@pytest.fixture
def unchecked_app(database_url: str, engine: sa.Engine) -> t.Iterator[Flask]:
    """An app on ``database_url`` with SOLIDQ_CHECK_ARGUMENTS off; ``engine`` (the ``app``
    fixture's, same database) reads what it stored and cleans up."""
    app = support.create_app(database_url, SOLIDQ_CHECK_ARGUMENTS=False)
    with app.app_context():
        yield app
        app.extensions["solidq"].dispose()
        support.db.engines[None].dispose()


def test_with_the_check_off_wrong_arguments_are_stored_as_before(unchecked_app, engine):
    send_email.perform_later(1, 2, 3, 4)
    SyncAccountJob.set(wait=10).perform_later()
    solidq.perform_all_later([send_email.new(), SyncAccountJob.new(1, nope=2)])
    assert stored_anything(engine) == [4, 3, 1]


def test_the_setting_defaults_to_on_and_takes_only_a_bool(tmp_path):
    app = support.create_app(f"sqlite:///{tmp_path}/default.db")
    assert app.config["SOLIDQ_CHECK_ARGUMENTS"] is True
    assert app.extensions["solidq"].settings.check_arguments is True

    with pytest.raises(TypeError, match="SOLIDQ_CHECK_ARGUMENTS must be True or False, not 'no'"):
        support.create_app(f"sqlite:///{tmp_path}/wrong.db", SOLIDQ_CHECK_ARGUMENTS="no")


# The inline and test adapters.


@pytest.fixture
def adapter_app(request: pytest.FixtureRequest, database_url: str, engine: sa.Engine):
    """An app on ``database_url`` with the adapter ``request.param`` (and the check set as
    ``check`` marks it); ``engine`` reads the tables it must not touch."""
    adapter, check = request.param
    app = support.create_app(database_url, SOLIDQ_ADAPTER=adapter, SOLIDQ_CHECK_ARGUMENTS=check)
    with app.app_context():
        yield app
        app.extensions["solidq"].dispose()
        support.db.engines[None].dispose()


@pytest.mark.parametrize("adapter_app", [("inline", True), ("test", True)], indirect=True)
def test_the_inline_and_test_adapters_check_too(adapter_app, engine):
    with pytest.raises(TypeError, match="argument_check.send_email"):
        send_email.perform_later(1, "a", "b")
    with pytest.raises(TypeError, match="argument_check.SyncAccountJob"):
        SyncAccountJob.set(wait=5).perform_later()
    with pytest.raises(TypeError, match=r"\(at position 1\)"):
        solidq.perform_all_later([send_email.new(1), send_email.new()])

    inline = adapter_app.config["SOLIDQ_ADAPTER"] == "inline"
    assert PERFORMED == []  # the inline adapter performed none of the bulk's first job either
    assert inline or testing.enqueued_jobs() == []
    assert stored_jobs(engine) == 0

    send_email.perform_later(5)
    if inline:
        assert PERFORMED == [(5, "welcome", False)]
    else:
        assert len(testing.enqueued_jobs()) == 1


@pytest.mark.parametrize("adapter_app", [("inline", False), ("test", False)], indirect=True)
def test_the_inline_and_test_adapters_skip_the_check_when_it_is_off(adapter_app, engine):
    if adapter_app.config["SOLIDQ_ADAPTER"] == "inline":
        with pytest.raises(TypeError, match="send_email"):  # the function's own, when called
            send_email.perform_later(1, "a", "b")
    else:
        send_email.perform_later(1, "a", "b")
        assert len(testing.enqueued_jobs()) == 1


# The shortcut of calls without keywords.


def _shapes() -> list[t.Callable[..., None]]:
    def none() -> None: ...
    def one(a): ...
    def one_default(a, b=1): ...
    def positional_only(a, /, b=1): ...
    def star(a, *args): ...
    def keyword_only(a, *, k): ...
    def keyword_only_default(a, *, k=1): ...
    def everything(a, /, b, c=1, *args, k, m=2, **kwargs): ...
    def var_keywords(**kwargs): ...

    return [
        none,
        one,
        one_default,
        positional_only,
        star,
        keyword_only,
        keyword_only_default,
        everything,
        var_keywords,
    ]


@pytest.mark.parametrize("function", _shapes(), ids=lambda function: function.__name__)
def test_the_shortcut_for_positional_calls_agrees_with_signature_bind(function):
    signature = inspect.signature(function)
    parameters = signatures.Parameters.of(signature)
    for count in range(5):
        args = tuple(range(count))
        try:
            signature.bind(*args)
            expected = None
        except TypeError as exc:
            expected = str(exc)
        try:
            parameters.bind(args, {})
            got = None
        except TypeError as exc:
            got = str(exc)
        assert got == expected, (function.__name__, count)
