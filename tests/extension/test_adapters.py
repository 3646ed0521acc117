"""The inline and test adapters, flask_solidq.testing and the pytest plugin."""

from __future__ import annotations

import datetime as dt

import pytest

from flask_solidq import SerializationError
from flask_solidq import current_job
from flask_solidq import testing
from tests import support
from tests.jobs import basic as jobs
from tests.support import solidq

pytest_plugins = ["pytester"]


@pytest.fixture
def inline_app(tmp_path):
    app = support.create_app(f"sqlite:///{tmp_path}/inline.db", SOLIDQ_ADAPTER="inline")
    with app.app_context():
        yield app


@pytest.fixture
def test_app(tmp_path):
    app = support.create_app(f"sqlite:///{tmp_path}/test.db", SOLIDQ_ADAPTER="test")
    with app.app_context():
        yield app


@pytest.fixture(autouse=True)
def clear_results():
    jobs.RESULTS.clear()
    yield
    jobs.RESULTS.clear()


def test_the_inline_adapter_performs_at_once_with_round_tripped_arguments(inline_app):
    job = jobs.store_pair.perform_later((1, 2), second=dt.date(2026, 1, 2))

    assert jobs.RESULTS == [((1, 2), dt.date(2026, 1, 2))]
    assert job.successfully_enqueued is True
    assert job.provider_job_id is None
    assert job.executions == 1


def test_the_inline_adapter_fails_on_arguments_a_database_could_not_store(inline_app):
    with pytest.raises(SerializationError):
        jobs.store_result.perform_later(object())
    assert jobs.RESULTS == []


def test_the_inline_adapter_lets_a_job_read_current_job(inline_app):
    seen = []

    @solidq.job(name="test_adapters.reads_current_job")
    def reads_current_job():
        seen.append(current_job.job_id)

    job = reads_current_job.perform_later()
    assert seen == [job.job_id]


def test_the_test_adapter_records_jobs_without_running_them(test_app):
    first = jobs.store_result.perform_later(1)
    second = jobs.StoreResultJob.set(wait=60).perform_later(2)
    solidq.perform_all_later([jobs.store_result.new(3)])

    assert testing.enqueued_jobs() == [first, second, testing.enqueued_jobs()[2]]
    assert jobs.RESULTS == []
    assert second.scheduled_at > first.enqueued_at


def test_assert_enqueued_with_matches_job_args_kwargs_and_queue(test_app):
    with testing.assert_enqueued_with(
        job=jobs.store_pair, args=[1], kwargs={"second": 2}, queue="low"
    ):
        jobs.store_pair.perform_later(1, second=2)

    with pytest.raises(AssertionError, match="store_result"):
        with testing.assert_enqueued_with(job=jobs.store_pair, args=[1]):
            jobs.store_result.perform_later(1)


def test_perform_enqueued_jobs_runs_them_in_order_including_the_ones_they_enqueue(test_app):
    @solidq.job(name="test_adapters.enqueues_another")
    def enqueues_another(value):
        jobs.RESULTS.append(value)
        jobs.store_result.perform_later(value + 1)

    enqueues_another.perform_later(1)
    jobs.store_result.perform_later(10)

    assert testing.perform_enqueued_jobs() == 3
    assert jobs.RESULTS == [1, 10, 2]
    assert testing.enqueued_jobs() == []


def test_perform_enqueued_jobs_can_run_only_some_definitions(test_app):
    jobs.store_result.perform_later(1)
    jobs.StoreResultJob.perform_later(2)

    assert testing.perform_enqueued_jobs(only=[jobs.StoreResultJob]) == 1
    assert jobs.RESULTS == [2]
    assert [type(job) for job in testing.enqueued_jobs()] == [jobs.store_result]


def test_the_testing_helpers_say_when_the_test_adapter_is_off(app):
    with pytest.raises(RuntimeError, match="SOLIDQ_ADAPTER"):
        testing.enqueued_jobs()


def test_the_pytest_plugin_records_jobs_for_a_pytest_flask_app(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    pytester.makeconftest(
        """
        import pytest
        from flask import Flask
        from flask_sqlalchemy import SQLAlchemy
        from flask_solidq import SolidQ

        db = SQLAlchemy()
        solidq = SolidQ()

        @solidq.job(name="plugin_test.greet")
        def greet(name):
            return f"hello {name}"

        @pytest.fixture
        def app(tmp_path):
            app = Flask(__name__)
            app.config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{tmp_path}/app.db"
            db.init_app(app)
            solidq.init_app(app)

            @app.post("/greet/<name>")
            def greet_view(name):
                greet.perform_later(name)
                return "ok"

            return app
        """
    )
    pytester.makepyfile(
        """
        from conftest import greet

        def test_a_request_enqueues_a_greeting(client, solidq_jobs):
            with solidq_jobs.assert_enqueued_with(job=greet, args=["ada"]):
                client.post("/greet/ada")
            assert [job.arguments for job in solidq_jobs.enqueued] == [("ada",)]
            assert solidq_jobs.perform_all() == 1
            assert solidq_jobs.enqueued == []
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
