"""The Prometheus metrics on every backend, through ``GET /solidq/metrics`` (closed as the
dashboard is) and ``flask solidq metrics``: jobs put in known states through the real enqueue,
claim, perform and finish operations, then every figure asserted exactly as
prometheus_client's own parser reads the exposition.
"""

from __future__ import annotations

import datetime as dt
import sys
import typing as t

import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from flask_solidq import models
from flask_solidq.operations import processes
from flask_solidq.operations import queues
from flask_solidq.reads import metrics
from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from tests import support
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.jobs import job_action as jobs
from tests.jobs import rate_limit as rate_limit_jobs
from tests.operations.test_job_actions import blocked_job
from tests.operations.test_job_actions import enqueue
from tests.operations.test_job_actions import failed_job
from tests.operations.test_job_actions import run_ready
from tests.operations.test_job_actions import scheduled_job

if t.TYPE_CHECKING:
    from flask import Flask

READY = t.cast(sa.Table, models.ReadyExecution.__table__)
PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)

URL = "/solidq/metrics"
MISSING = 'pip install "flask-solidq[metrics]"'

#: metric name -> label values (in the family's label order) -> value.
Samples = dict[str, dict[tuple[str, ...], float]]


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    """Overrides conftest's ``app``: the dashboard on (testing mode opens it)."""
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


@pytest.fixture(autouse=True)
def clean_job_module() -> t.Iterator[None]:
    jobs.FAILURES.clear()
    jobs.PERFORMED.clear()
    yield
    jobs.FAILURES.clear()
    jobs.PERFORMED.clear()


@pytest.fixture
def make_app(app: Flask, database_url: str) -> t.Iterator[t.Callable[..., Flask]]:
    """More apps on the same database with other settings (``app`` empties it after)."""
    made: list[Flask] = []

    def make(**config: t.Any) -> Flask:
        made.append(support.create_app(database_url, **{"SOLIDQ_DASHBOARD": True, **config}))
        return made[-1]

    yield make
    for other in made:
        with other.app_context():
            other.extensions["solidq"].dispose()
            support.db.engines[None].dispose()


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sample.labels.values())] = sample.value
    return samples


def scrape(app: Flask, **request: t.Any) -> Samples:
    response = app.test_client().get(URL, **request)
    assert response.status_code == 200, response.text
    assert response.content_type == "text/plain; version=0.0.4; charset=utf-8"
    return parse(response.text)


def run_metrics(app: Flask, *args: str) -> t.Any:
    return app.test_cli_runner().invoke(args=["solidq", "metrics", *args])


def age_ready_jobs(engine: sa.Engine, queue_name: str, seconds: float) -> None:
    """Make the ready jobs of ``queue_name`` ``seconds`` old."""
    with engine.begin() as connection:
        connection.execute(
            READY.update()
            .where(READY.c.queue_name == queue_name)
            .values(created_at=utcnow() - dt.timedelta(seconds=seconds))
        )


def every_state(app: Flask, engine: sa.Engine) -> None:
    """alpha: 1 failed, 2 ready (120 s old). beta: 1 finished, 1 scheduled, paused. default:
    1 claimed and 1 deferred by a rate limit; a concurrency slot's holder (ready) and 1 job
    blocked behind it; 2 dedupe jobs with open keys and 1 collecting job of 2 calls, ready."""
    failed_job(app, engine, "broken", queue="alpha")
    enqueue(app, jobs.task, "done", queue="beta")
    run_ready(app, engine)
    for note in ("admitted", "deferred"):
        enqueue(app, rate_limit_jobs.global_job, note)
    assert len(claim(engine, 10)) == 1  # the second is deferred
    blocked_job(app, "account-1")
    for account in ("account-1", "account-2"):
        enqueue(app, jobs.dedupe, account, "n")
    for account in ("account-3", "account-3"):
        enqueue(app, jobs.collect, account, "n")
    for note in ("one", "two"):
        enqueue(app, jobs.task, note, queue="alpha")
    age_ready_jobs(engine, "alpha", 120)
    scheduled_job(app, "later", queue="beta")
    queues.pause(engine, "beta")


def test_jobs_by_queue_and_state_and_the_other_figures_of_each_queue(app, engine):
    every_state(app, engine)

    samples = scrape(app)

    states = ("ready", "scheduled", "deferred", "claimed", "blocked", "failed")

    def by_state(queue: str, **sizes: int) -> dict[tuple[str, ...], float]:
        return {(queue, state): sizes.get(state, 0) for state in states}

    assert samples["solidq_jobs"] == {
        **by_state("alpha", ready=2, failed=1),
        **by_state("beta", scheduled=1),
        **by_state("default", ready=4, claimed=1, deferred=1, blocked=1),
    }
    assert samples["solidq_jobs_finished_last_hour"] == {
        ("alpha",): 0,
        ("beta",): 1,
        ("default",): 0,
    }
    assert samples["solidq_jobs_failed_last_hour"] == {("alpha",): 1, ("beta",): 0, ("default",): 0}
    assert samples["solidq_queue_paused"] == {("alpha",): 0, ("beta",): 1, ("default",): 0}
    latency = samples["solidq_queue_latency_seconds"]
    assert 120 <= latency[("alpha",)] < 130
    assert latency[("beta",)] == 0
    assert 0 <= latency[("default",)] < 60
    assert samples["solidq_rate_limit_waiting_jobs"] == {("rate_test.global/global",): 1}
    assert samples["solidq_rate_limit_budgets_waiting"] == {(): 1}
    assert samples["solidq_coalesce_open_keys"] == {
        ("job_action_test.collect",): 1,
        ("job_action_test.dedupe",): 2,
    }
    assert samples["solidq_coalesce_waiting_calls"] == {
        ("job_action_test.collect",): 2,
        ("job_action_test.dedupe",): 0,
    }


def test_processes_by_kind_alive_or_silent_list_every_kind(app, engine):
    supervisor = processes.register(
        engine, kind="Supervisor(fork)", name="s", pid=10, supervisor_id=None, metadata={}
    )
    for name, kind in (("w1", "Worker"), ("w2", "Worker"), ("d", "Dispatcher")):
        processes.register(
            engine, kind=kind, name=name, pid=11, supervisor_id=supervisor, metadata={}
        )
    with engine.begin() as connection:
        connection.execute(
            PROCESSES.update()
            .where(PROCESSES.c.name == "w2")
            .values(last_heartbeat_at=utcnow() - dt.timedelta(seconds=301))
        )

    assert scrape(app)["solidq_processes"] == {
        ("Dispatcher", "alive"): 1,
        ("Dispatcher", "silent"): 0,
        ("Scheduler", "alive"): 0,
        ("Scheduler", "silent"): 0,
        ("Supervisor(fork)", "alive"): 1,
        ("Supervisor(fork)", "silent"): 0,
        ("Supervisor(thread)", "alive"): 0,
        ("Supervisor(thread)", "silent"): 0,
        ("Worker", "alive"): 1,
        ("Worker", "silent"): 1,
    }


def test_an_empty_queue_reports_no_queue_and_zero_processes(app, engine):
    samples = scrape(app)

    for name in ("solidq_jobs", "solidq_queue_latency_seconds", "solidq_coalesce_open_keys"):
        assert name not in samples  # a family with no sample
    assert samples["solidq_rate_limit_budgets_waiting"] == {(): 0}
    assert set(samples["solidq_processes"].values()) == {0}


def test_budgets_past_the_cap_add_up_under_other(app, engine):
    # Each account's first job is admitted, the rest deferred: a 3, b 2, c 1, d 1 waiting.
    for account, size in (("a", 4), ("b", 3), ("c", 2), ("d", 2)):
        for index in range(size):
            enqueue(app, rate_limit_jobs.per_account, account, index)
    assert len(claim(engine, 20)) == 4

    with db.read(engine) as connection:
        figures = metrics.read_figures(connection, threshold=300, max_budgets=2)

    assert figures.waiting_by_budget == [
        ("rate_test.per_account/a", 3),
        ("rate_test.per_account/b", 2),
        (metrics.OTHER_BUDGETS, 2),
    ]
    assert figures.budgets_waiting == 4
    waiting = scrape(app)["solidq_rate_limit_waiting_jobs"]
    assert waiting == {
        ("rate_test.per_account/a",): 3,
        ("rate_test.per_account/b",): 2,
        ("rate_test.per_account/c",): 1,
        ("rate_test.per_account/d",): 1,
    }


def test_closed_like_the_dashboard_without_configuration_outside_testing(app, engine):
    app.testing = False

    response = app.test_client().get(URL)

    assert response.status_code == 403
    assert "SOLIDQ_DASHBOARD_BASIC_AUTH" in response.text


def test_basic_auth_takes_only_the_right_credentials(make_app, engine):
    protected = make_app(SOLIDQ_DASHBOARD_BASIC_AUTH=("prometheus", "s3cret"), TESTING=False)
    client = protected.test_client()

    assert client.get(URL).status_code == 401
    assert client.get(URL, auth=("prometheus", "wrong")).status_code == 401
    assert "solidq_processes" in scrape(protected, auth=("prometheus", "s3cret"))


def test_an_openmetrics_scraper_gets_openmetrics(app, engine):
    enqueue(app, jobs.task, "one")

    response = app.test_client().get(
        URL, headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )

    assert response.status_code == 200
    assert response.content_type.startswith("application/openmetrics-text; version=1.0.0")
    assert response.text.endswith("# EOF\n")
    assert 'solidq_jobs{queue="default",state="ready"} 1.0' in response.text


def test_the_cli_prints_what_the_route_serves(app, engine):
    every_state(app, engine)

    result = run_metrics(app)

    assert result.exit_code == 0, result.output
    printed, served = parse(result.stdout), scrape(app)
    for samples in (printed, served):
        del samples["solidq_queue_latency_seconds"]  # the clock moved between the two
    assert printed == served


def test_the_cli_writes_a_file_whole_for_the_textfile_collector(app, engine, tmp_path):
    enqueue(app, jobs.task, "one")
    target = tmp_path / "solidq.prom"
    target.write_text("old figures\n")

    result = run_metrics(app, "--output", str(target))

    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert parse(target.read_text())["solidq_jobs"][("default", "ready")] == 1
    assert [path.name for path in tmp_path.iterdir()] == ["solidq.prom"]


def test_without_prometheus_client_the_route_answers_501_and_the_cli_exits_1(
    app, engine, monkeypatch
):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed

    response = app.test_client().get(URL)
    result = run_metrics(app)

    assert response.status_code == 501
    assert MISSING in response.text
    assert result.exit_code == 1
    assert result.stdout == ""
    assert MISSING in result.stderr


def test_the_cli_exits_1_and_keeps_the_last_file_when_the_database_cant_be_reached(tmp_path):
    app = support.create_app(f"sqlite:///{tmp_path}/no/such/directory/queue.db")
    target = tmp_path / "solidq.prom"
    target.write_text("last figures\n")
    try:
        result = run_metrics(app, "--output", str(target))
    finally:
        with app.app_context():
            app.extensions["solidq"].engine.dispose()
            support.db.engines[None].dispose()

    assert result.exit_code == 1
    assert result.stderr.startswith("Error: Can't connect to the database sqlite:///")
    assert "unable to open database file" in result.stderr
    assert target.read_text() == "last figures\n"


def test_the_route_answers_503_when_the_database_cant_be_reached(tmp_path):
    app = support.create_app(
        f"sqlite:///{tmp_path}/no/such/directory/queue.db", SOLIDQ_DASHBOARD=True
    )
    try:
        response = app.test_client().get(URL)
    finally:
        with app.app_context():
            app.extensions["solidq"].engine.dispose()
            support.db.engines[None].dispose()

    assert response.status_code == 503
    assert response.text.startswith("Can't reach the queue's database: ")
    assert "unable to open database file" in response.text
