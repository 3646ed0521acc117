"""``SOLIDQ_METRICS_MAX_QUEUES`` on every backend: ``/metrics`` labels at most that many
queues, the largest (most jobs waiting, failed or finished in the last hour), and sums the
rest under ``queue="other"``. Each capped scrape is checked against an uncapped one of the
same database: the labelled queues' figures are theirs, and ``other``'s are the rest's summed
(latency: the longest; paused: how many are).
"""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import config
from flask_solidq.models.tables import JOBS
from flask_solidq.operations import queues
from flask_solidq.timing import utcnow
from tests import support
from tests.operations.test_job_actions import enqueue
from tests.operations.test_job_actions import run_ready
from tests.reads import test_metrics as metrics_tests
from tests.reads.test_metrics import Samples
from tests.reads.test_metrics import age_ready_jobs
from tests.reads.test_metrics import clean_job_module  # noqa: F401
from tests.reads.test_metrics import every_state
from tests.reads.test_metrics import jobs
from tests.reads.test_metrics import run_metrics
from tests.reads.test_metrics import scrape

if t.TYPE_CHECKING:
    from flask import Flask

# test_metrics' fixtures: the dashboard on, and more apps on the same database.
app = metrics_tests.app
make_app = metrics_tests.make_app

OTHER = "other"
#: The gauges labelled by queue alone.
PER_QUEUE = (
    "solidq_queue_latency_seconds",
    "solidq_queue_paused",
    "solidq_jobs_finished_last_hour",
    "solidq_jobs_failed_last_hour",
)


@pytest.fixture(autouse=True)
def _push_request_context() -> None:
    """Overrides pytest-flask's fixture of that name, which keeps ``app``'s context pushed
    around the whole test: ``flask solidq metrics`` would then run in ``app``, not in the
    app it is invoked on."""


def many_queues(app: Flask, engine: sa.Engine) -> None:
    """Every state over alpha, beta (paused) and default (every_state); then gamma with 2
    ready jobs (an hour old), delta with 1, and empty, a paused queue without jobs."""
    every_state(app, engine)
    for note in ("g1", "g2"):
        enqueue(app, jobs.task, note, queue="gamma")
    age_ready_jobs(engine, "gamma", 3600)
    enqueue(app, jobs.task, "d1", queue="delta")
    queues.pause(engine, "empty")


def queues_of(samples: Samples) -> set[str]:
    return {labels[0] for labels in samples["solidq_queue_paused"]}


def size(samples: Samples, queue: str) -> float:
    """The jobs the gauges count of ``queue``: in each state, and finished in the last hour."""
    in_states = sum(v for labels, v in samples["solidq_jobs"].items() if labels[0] == queue)
    return in_states + samples["solidq_jobs_finished_last_hour"][(queue,)]


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_metrics_label_the_largest_queues_and_sum_the_rest_under_other(app, engine, make_app, cap):
    many_queues(app, engine)
    full = scrape(make_app(SOLIDQ_METRICS_MAX_QUEUES=1000))
    capped = scrape(make_app(SOLIDQ_METRICS_MAX_QUEUES=cap))
    every = queues_of(full)
    assert every == {"alpha", "beta", "default", "gamma", "delta", "empty"}
    labelled = queues_of(capped) - {OTHER}
    assert queues_of(capped) == labelled | {OTHER}
    ranked = sorted(every, key=lambda queue: (-size(full, queue), queue))
    assert sorted(labelled) == sorted(ranked[:cap])
    rest = every - labelled
    for (queue, state), value in capped["solidq_jobs"].items():
        if queue == OTHER:
            assert value == sum(full["solidq_jobs"][(name, state)] for name in rest), state
        else:
            assert value == full["solidq_jobs"][(queue, state)]
    for family in PER_QUEUE:
        for (queue,), value in capped[family].items():
            if queue != OTHER:
                assert value == pytest.approx(full[family][(queue,)], abs=5), family
            elif family == "solidq_queue_latency_seconds":
                longest = max(full[family][(name,)] for name in rest)
                assert value == pytest.approx(longest, abs=5)
            else:
                assert value == sum(full[family][(name,)] for name in rest), family
    assert capped["solidq_queue_paused"][(OTHER,)] == len(rest & {"beta", "empty"})


def test_metrics_have_no_other_queue_when_every_queue_is_labelled(app, engine, make_app):
    many_queues(app, engine)
    exactly = scrape(make_app(SOLIDQ_METRICS_MAX_QUEUES=6))
    assert queues_of(exactly) == {"alpha", "beta", "default", "gamma", "delta", "empty"}


@pytest.mark.parametrize("cap", [1, 100])
def test_a_queue_whose_jobs_finished_long_ago_is_not_listed(app, engine, make_app, cap):
    """Whether every queue is labelled (100) or the largest are ranked (1)."""
    enqueue(app, jobs.task, "old", queue="old")
    run_ready(app, engine)
    with engine.begin() as connection:
        connection.execute(JOBS.update().values(finished_at=utcnow() - dt.timedelta(hours=2)))
    for note in ("a", "b"):
        enqueue(app, jobs.task, note, queue="busy")
    enqueue(app, jobs.task, "c", queue="quiet")
    samples = scrape(make_app(SOLIDQ_METRICS_MAX_QUEUES=cap))
    assert queues_of(samples) == ({"busy", OTHER} if cap == 1 else {"busy", "quiet"})
    if cap == 1:
        assert samples["solidq_jobs"][(OTHER, "ready")] == 1


def test_the_default_cap_is_100_queues(app, engine):
    names = [f"queue-{number:03d}" for number in range(101)]
    with app.app_context():
        support.solidq.perform_all_later([jobs.task.set(queue=name).new(name) for name in names])
    enqueue(app, jobs.task, "second", queue="queue-100")  # the largest
    assert app.config["SOLIDQ_METRICS_MAX_QUEUES"] == 100
    samples = scrape(app)
    labelled = queues_of(samples) - {OTHER}
    assert len(labelled) == 100
    assert "queue-100" in labelled
    # Ties by name: the last of the others is the one left out.
    assert queues_of(samples) - labelled == {OTHER}
    assert "queue-099" not in labelled
    assert samples["solidq_jobs"][(OTHER, "ready")] == 1


def test_flask_solidq_metrics_keeps_the_cap_too(app, engine, make_app):
    many_queues(app, engine)
    result = run_metrics(make_app(SOLIDQ_METRICS_MAX_QUEUES=1))
    assert result.exit_code == 0, result.output
    assert 'solidq_queue_paused{queue="other"} 2.0' in result.output
    assert 'queue="alpha"' not in result.output


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (0, ValueError, "SOLIDQ_METRICS_MAX_QUEUES must be 1 or more, not 0."),
        (-5, ValueError, "SOLIDQ_METRICS_MAX_QUEUES must be 1 or more, not -5."),
        ("100", TypeError, "SOLIDQ_METRICS_MAX_QUEUES must be an int, not '100'."),
        (2.5, TypeError, "SOLIDQ_METRICS_MAX_QUEUES must be an int, not 2.5."),
        (True, TypeError, "SOLIDQ_METRICS_MAX_QUEUES must be an int, not True."),
        (None, TypeError, "SOLIDQ_METRICS_MAX_QUEUES must be an int, not None."),
    ],
)
def test_a_bad_cap_is_refused_naming_the_key(value, error, message):
    with pytest.raises(error) as raised:
        config.load_settings({"SOLIDQ_METRICS_MAX_QUEUES": value})
    assert str(raised.value) == message


def test_the_cap_is_read_with_its_default_shown_in_the_config():
    settings = {"SOLIDQ_METRICS_MAX_QUEUES": 7}
    assert config.load_settings(settings).metrics_max_queues == 7
    defaults: dict[str, t.Any] = {}
    assert config.load_settings(defaults).metrics_max_queues == 100
    assert defaults["SOLIDQ_METRICS_MAX_QUEUES"] == 100
