"""A NUL character in a queue name or a key is refused before anything is written, the same
on every backend: PostgreSQL refuses it in text, SQLite would store it (and the dashboard
then answers 400 for that queue, the metrics print a raw NUL). Queue names (the class's, a
decorator's, ``set(queue=)``, a worker's queue list, a pause), concurrency, rate-limit and
coalesce keys (from ``key=`` callables, at enqueue), job names, named budgets, and recurring
tasks' names and queues."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import coalesce
from flask_solidq import config
from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from flask_solidq import models
from flask_solidq.controls.rate_limit import named_budgets
from flask_solidq.definitions import registry
from flask_solidq.operations import queues
from flask_solidq.recurring import tasks
from tests import support
from tests.support import solidq

#: Every table an enqueue or a pause writes: none may hold a row after a refused one.
TABLES = (
    models.JobRecord,
    models.ReadyExecution,
    models.ScheduledExecution,
    models.BlockedExecution,
    models.Semaphore,
    models.CoalesceKey,
    models.Pause,
)

NUL = "\x00"


@solidq.job(name="enqueue_nul.echo")
def echo(*args: object) -> None:
    pass


@solidq.job(name="enqueue_nul.limited")
@limits_concurrency(key=lambda key: key, to=1)
def limited(key: str) -> None:
    pass


@solidq.job(name="enqueue_nul.rated")
@limits_rate(to=5, per=60, key=lambda key: key)
def rated(key: str) -> None:
    pass


@solidq.job(name="enqueue_nul.coalesced")
@coalesce(key=lambda key: key)
def coalesced(key: str) -> None:
    pass


@pytest.fixture(autouse=True)
def _forget_what_the_test_defined() -> t.Iterator[None]:
    """Job and budget names are global to the process: forget whatever a test added."""
    jobs, budgets = set(registry.names()), set(named_budgets.names())
    yield
    for name in set(registry.names()) - jobs:
        registry.unregister(registry.lookup(name))
    for name in set(named_budgets.names()) - budgets:
        named_budgets.unregister(name)


def assert_nothing_stored(engine: sa.Engine) -> None:
    for table in TABLES:
        assert support.count(engine, table) == 0, table


@pytest.mark.parametrize(
    ("definition", "what"),
    [
        (limited, "concurrency key"),
        (rated, "rate-limit key"),
        (coalesced, "coalesce key"),
    ],
)
def test_a_key_with_a_nul_is_refused_at_enqueue(app, engine, definition, what):
    message = f"{definition.job_name}'s {what} holds a NUL character"
    with app.app_context():
        with pytest.raises(ValueError, match=message):
            definition.perform_later(f"account{NUL}7")
        with pytest.raises(ValueError, match=message):
            solidq.perform_all_later([echo.new(1), definition.new(f"{NUL}")])

    assert_nothing_stored(engine)


def test_set_queue_with_a_nul_is_refused_before_anything_is_stored(app, engine):
    with app.app_context(), pytest.raises(ValueError, match=r"set\(queue=\) holds a NUL"):
        echo.set(queue=f"mail{NUL}").perform_later(1)

    assert_nothing_stored(engine)


def test_a_job_declared_with_a_nul_in_its_queue_name_is_refused():
    with pytest.raises(ValueError, match="queue_name holds a NUL character"):

        @solidq.job(name="enqueue_nul.declared", queue=f"mail{NUL}")
        def declared() -> None:
            pass


@pytest.mark.parametrize(
    ("name", "message"),
    [(f"send{NUL}mail", "holds a NUL character"), ("j" * 256, "it takes at most 255")],
)
def test_a_job_name_its_column_cant_keep_is_refused_when_the_job_is_declared(name, message):
    with pytest.raises(ValueError, match=f"The name of job .*declared .*{message}"):

        @solidq.job(name=name)
        def declared() -> None:
            pass

    assert name not in registry.names()


def test_pausing_a_queue_named_with_a_nul_is_refused(app, engine):
    with app.app_context(), pytest.raises(ValueError, match="NUL character"):
        queues.pause(engine, f"mail{NUL}")

    assert_nothing_stored(engine)


def test_a_worker_queue_list_with_a_nul_is_refused():
    with pytest.raises(ValueError, match=r"queue 'ma\\x00il' in SOLIDQ_WORKERS\[0\]"):
        config.worker_settings({"queues": ["default", f"ma{NUL}il"]})


def test_a_named_budget_with_a_nul_is_refused():
    with pytest.raises(ValueError, match="without '/' or NUL"):
        solidq.rate_limiter.register(f"stripe{NUL}", to=100, per=60)


@pytest.mark.parametrize(
    ("recurring", "message"),
    [
        ({f"daily{NUL}": {"job": "x:y", "schedule": "every day"}}, "task name holds a NUL"),
        ({"d" * 256: {"job": "x:y", "schedule": "every day"}}, "it takes at most 255"),
    ],
)
def test_a_recurring_task_name_the_tables_cant_keep_is_refused_at_init(recurring, message):
    with pytest.raises(ValueError, match=message):
        support.create_app("sqlite://", SOLIDQ_RECURRING=recurring)


def test_a_recurring_task_with_a_nul_in_its_queue_is_refused():
    entry = {"job": "tests.test_enqueue_nul:echo", "schedule": "every day", "queue": f"q{NUL}"}
    app = support.create_app("sqlite://", SOLIDQ_RECURRING={"daily": entry})

    with pytest.raises(ValueError, match=r"SOLIDQ_RECURRING\['daily'\]: .*holds a NUL"):
        tasks.load_all(app.extensions["solidq"].settings.recurring)


def test_a_queue_name_and_key_without_a_nul_are_stored(app, engine):
    with app.app_context():
        echo.set(queue="mail-ü").perform_later(1)
        limited.perform_later("account/7")

    assert sorted(row.queue_name for row in support.rows(engine, models.JobRecord)) == [
        "default",
        "mail-ü",
    ]
