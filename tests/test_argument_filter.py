"""``SOLIDQ_FILTER_ARGUMENTS`` (:mod:`flask_solidq.argument_filter`), on every backend: a
``password=``, an ``Authorization`` header nested in a dict and an ``api_key`` in a
positional dict are shown as ``[FILTERED]`` by the dashboard (job page, lists, search,
collected calls, batches) and the CLI, and never logged; the job performed gets the real
values; a search can't find a filtered value."""

from __future__ import annotations

import json
import logging
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import argument_filter
from flask_solidq import coalesce
from flask_solidq import config
from flask_solidq import models
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.testing import work_off
from tests import support
from tests.dashboard.test_dashboard_browser import base_url  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import browser  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import dashboard_app  # noqa: F401 - a fixture
from tests.dashboard.test_dashboard_browser import page as browser_page  # noqa: F401 - a fixture
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support import solidq

if t.TYPE_CHECKING:
    from click.testing import Result
    from flask import Flask

JOBS = t.cast(sa.Table, models.JobRecord.__table__)

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

PASSWORD = "hunter2-pw-5b1e"
AUTHORIZATION = "Bearer auth-9c4d"
API_KEY = "key-api-3f7a"
COOKIE = "session-cookie-e21f"
SECRETS = (PASSWORD, AUTHORIZATION, API_KEY, COOKIE)

#: What the jobs below were called with, as they received it.
PERFORMED: list[tuple[t.Any, ...]] = []


@solidq.job(name="argument_filter.sign_in")
def sign_in(user: str, account: dict[str, t.Any], *, password: str, request: t.Any) -> None:
    PERFORMED.append((user, account, password, request))


@solidq.job(name="argument_filter.refused_sign_in")
def refused_sign_in(user: str, account: dict[str, t.Any], *, password: str, request: t.Any) -> None:
    raise ValueError("the bank refused the sign-in")


@solidq.job(name="argument_filter.notify_all")
@coalesce(key="all", on_conflict="collect", max_calls=10)
def notify_all(calls: list[t.Any]) -> None:
    PERFORMED.extend((call.args, call.kwargs) for call in calls)


def sign_in_arguments() -> tuple[tuple[t.Any, ...], dict[str, t.Any]]:
    """Arguments with a secret under every kind of key the filter looks at."""
    args = ("ada", {"API_KEY": API_KEY, "region": "eu-west"})
    kwargs = {
        "password": PASSWORD,
        "request": {"headers": {"Authorization": AUTHORIZATION}, "cookies": [{"x": COOKIE}]},
    }
    return args, kwargs


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> t.Iterator[pytest.LogCaptureFixture]:
    """The records of the ``flask_solidq`` loggers at DEBUG, the log subscriber connected."""
    log_subscriber.connect()
    try:
        with caplog.at_level(logging.DEBUG, logger=log_subscriber.LOGGER_NAME):
            yield caplog
    finally:
        log_subscriber.disconnect()


def logged_text(logs: pytest.LogCaptureFixture) -> str:
    """Each record's message and every field it carries (a JSON formatter writes them)."""
    assert logs.records, "nothing was logged: a check of the lines would prove nothing"
    return "\n".join(f"{record.getMessage()} {record.__dict__!r}" for record in logs.records)


def cli(app: Flask, *args: object) -> Result:
    result = app.test_cli_runner().invoke(args=["solidq", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result


def assert_hidden(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text
    assert "FILTERED" in text


def page(app: Flask, path: str) -> str:
    response = app.test_client().get(path)
    assert response.status_code == 200
    return response.get_data(as_text=True)


def test_the_job_page_and_the_cli_show_filtered_values_and_the_job_gets_the_real_ones(app, logs):
    args, kwargs = sign_in_arguments()
    with app.app_context():
        job_id = sign_in.perform_later(*args, **kwargs).provider_job_id

    ready_page = page(app, f"/solidq/jobs/{job_id}")
    assert_hidden(ready_page)
    assert "eu-west" in ready_page  # what isn't secret is still shown
    assert '"password": "[FILTERED]"' in ready_page.replace("&#34;", '"')
    assert_hidden(cli(app, "job", job_id).output)
    assert "eu-west" in cli(app, "job", job_id).output

    PERFORMED.clear()
    with app.app_context():
        work_off()
    assert PERFORMED == [
        (
            "ada",
            {"API_KEY": API_KEY, "region": "eu-west"},
            PASSWORD,
            {"headers": {"Authorization": AUTHORIZATION}, "cookies": [{"x": COOKIE}]},
        )
    ]

    assert_hidden(page(app, f"/solidq/jobs/{job_id}"))
    finished = cli(app, "jobs", "--state", "finished").output
    assert str(job_id) in finished
    assert not any(secret in finished for secret in SECRETS)
    assert not any(secret in logged_text(logs) for secret in SECRETS)


def test_a_failed_job_is_listed_and_shown_filtered_and_its_failure_logs_no_secret(app, logs):
    args, kwargs = sign_in_arguments()
    with app.app_context():
        job_id = refused_sign_in.perform_later(*args, **kwargs).provider_job_id
        work_off()

    failed_list = page(app, "/solidq/jobs?state=failed")
    assert f"/solidq/jobs/{job_id}" in failed_list
    assert not any(secret in failed_list for secret in SECRETS)
    assert_hidden(page(app, f"/solidq/jobs/{job_id}"))
    listed = cli(app, "jobs", "--state", "failed").output
    assert "the bank refused" in listed
    assert not any(secret in listed for secret in SECRETS)
    assert_hidden(cli(app, "job", job_id).output)
    assert any(record.levelno >= logging.WARNING for record in logs.records)
    assert not any(secret in logged_text(logs) for secret in SECRETS)


def test_an_error_that_quotes_a_stored_value_quotes_it_filtered(app, engine, logs):
    args, kwargs = sign_in_arguments()
    with app.app_context():
        job_id = sign_in.perform_later(*args, **kwargs).provider_job_id
    # A form this version doesn't know (written by a later one): its error quotes it.
    with engine.begin() as connection:
        stored = json.loads(
            connection.scalar(sa.select(JOBS.c.arguments).where(JOBS.c.id == job_id))
        )
        stored["kwargs"]["request"] = {"_sq": "later-form", "v": 1, "Password": PASSWORD}
        connection.execute(
            JOBS.update().where(JOBS.c.id == job_id).values(arguments=json.dumps(stored))
        )

    PERFORMED.clear()
    with app.app_context():
        work_off()

    assert PERFORMED == []
    shown = page(app, f"/solidq/jobs/{job_id}").replace("&#39;", "'")
    assert "Unknown stored form 'later-form'" in shown
    assert "'Password': '[FILTERED]'" in shown
    assert_hidden(shown)
    assert_hidden(cli(app, "job", job_id).output)
    assert not any(secret in logged_text(logs) for secret in SECRETS)


def test_searching_never_finds_a_filtered_value_but_finds_the_rest(app):
    args, kwargs = sign_in_arguments()
    with app.app_context():
        job_id = sign_in.perform_later(*args, **kwargs).provider_job_id
    link = f"/solidq/jobs/{job_id}"

    assert link in page(app, "/solidq/jobs?state=ready&q=eu-west")
    assert link in page(app, "/solidq/jobs?state=ready&q=password")  # a key is shown
    for secret in (*SECRETS, "hunter2", "BEARER AUTH"):
        found = page(app, f"/solidq/jobs?state=ready&q={secret}")
        assert link not in found, secret
        assert "No ready jobs matching" in found


def test_searching_finds_a_value_the_filter_leaves_out(database_url):
    with support.app_emptied_after(
        database_url, SOLIDQ_DASHBOARD=True, SOLIDQ_FILTER_ARGUMENTS=[]
    ) as app:
        args, kwargs = sign_in_arguments()
        with app.app_context():
            job_id = sign_in.perform_later(*args, **kwargs).provider_job_id

        assert f"/solidq/jobs/{job_id}" in page(app, f"/solidq/jobs?state=ready&q={PASSWORD}")
        shown = page(app, f"/solidq/jobs/{job_id}")
        assert all(secret in shown for secret in SECRETS)
        assert "FILTERED" not in shown


def test_collected_calls_are_shown_filtered_and_performed_with_the_real_values(app, logs):
    with app.app_context():
        first = notify_all.perform_later({"api_key": API_KEY}, channel="mail")
        notify_all.perform_later("ada", auth_token=PASSWORD, headers={"Cookie": COOKIE})
    job_id = first.provider_job_id

    shown = page(app, f"/solidq/jobs/{job_id}")
    assert 'id="calls"' in shown
    assert "mail" in shown
    for secret in (API_KEY, PASSWORD, COOKIE):
        assert secret not in shown

    PERFORMED.clear()
    with app.app_context():
        work_off()
    assert PERFORMED == [
        (({"api_key": API_KEY},), {"channel": "mail"}),
        (("ada",), {"auth_token": PASSWORD, "headers": {"Cookie": COOKIE}}),
    ]
    assert not any(secret in logged_text(logs) for secret in SECRETS)


def test_a_batchs_metadata_is_shown_filtered(app):
    with app.app_context(), solidq.batch(label="imports", api_token=API_KEY) as batch:
        sign_in.perform_later("ada", {}, password=PASSWORD, request=None)

    for path in ("/solidq/batches", f"/solidq/batches/{batch.id}"):
        shown = page(app, path)
        assert API_KEY not in shown and PASSWORD not in shown
    assert "FILTERED" in page(app, f"/solidq/batches/{batch.id}")
    for args in (("batches",), ("batch", batch.id)):
        output = cli(app, *args).output
        assert API_KEY not in output
    assert "[FILTERED]" in cli(app, "batch", batch.id).output


def test_words_of_ones_own_filter_what_they_contain_and_only_that(database_url):
    with support.app_emptied_after(
        database_url, SOLIDQ_DASHBOARD=True, SOLIDQ_FILTER_ARGUMENTS=["SSN"]
    ) as app:
        with app.app_context():
            job_id = sign_in.perform_later(
                "ada", {"user_ssn": "078-05-1120"}, password=PASSWORD, request=None
            ).provider_job_id

        shown = cli(app, "job", job_id).output
        assert "078-05-1120" not in shown
        assert '"user_ssn": "[FILTERED]"' in shown
        assert PASSWORD in shown  # the default words are replaced, not added to


@pytest.mark.processes
def test_a_worker_process_performs_with_the_real_values_and_logs_none_at_debug(
    app, engine: sa.Engine, launcher: runtime_support.Launcher
):
    secrets = {"password": PASSWORD, "headers": {"Authorization": AUTHORIZATION}}
    with app.app_context():
        job_id = worker_jobs.record.perform_later(secrets).provider_job_id

    work = launcher.start(
        "--once", "--log-level", "debug", "--log-format", "json", app_module="tests.apps.once_app"
    )

    assert work.wait(60) == 0, work.output()
    (run,) = runtime_support.runs(engine, "worker_test.record")
    assert run.value == str(secrets)  # the job got them
    output = work.output()
    assert f'"event": "perform", "job_name": "worker_test.record", "job_id": {job_id}' in output
    assert PASSWORD not in output and AUTHORIZATION not in output
    shown = cli(app, "job", job_id).output
    assert PASSWORD not in shown and AUTHORIZATION not in shown


def test_a_browser_shows_the_job_page_filtered_and_its_search_box_finds_no_secret(
    dashboard_app,  # noqa: F811
    browser_page,  # noqa: F811
):
    from playwright.sync_api import expect

    args, kwargs = sign_in_arguments()
    with dashboard_app.app_context():
        job_id = sign_in.perform_later(*args, **kwargs).provider_job_id

    browser_page.goto(f"/solidq/jobs/{job_id}")
    payload = browser_page.locator("pre").last
    expect(payload).to_contain_text('"password": "[FILTERED]"')
    expect(payload).to_contain_text('"Authorization": "[FILTERED]"')
    expect(payload).to_contain_text('"API_KEY": "[FILTERED]"')
    expect(payload).to_contain_text("eu-west")
    assert not any(secret in browser_page.content() for secret in SECRETS)

    browser_page.goto("/solidq/jobs?state=ready")
    browser_page.get_by_role("searchbox").fill(PASSWORD)
    browser_page.get_by_role("button", name="Filter").click()
    expect(browser_page.get_by_text("No ready jobs matching")).to_be_visible()
    browser_page.get_by_role("searchbox").fill("eu-west")
    browser_page.get_by_role("button", name="Filter").click()
    expect(browser_page.get_by_role("link", name=str(job_id), exact=True)).to_be_visible()


# The filter itself, without a database.


def test_keys_containing_a_word_are_filtered_case_insensitively_at_any_depth():
    shown = argument_filter.ArgumentFilter.of(["token", "api_key"])
    stored = {
        "args": [{"X-Api_Key": 1, "list": [{"refreshToken": 2}, 3]}, "token"],
        "kwargs": {"TOKEN": {"deep": 4}, "tokens": [5], "name": "token"},
        "job": "app.jobs:token",
    }

    assert shown.filtered_payload(stored) == {
        "args": [{"X-Api_Key": "[FILTERED]", "list": [{"refreshToken": "[FILTERED]"}, 3]}, "token"],
        "kwargs": {"TOKEN": "[FILTERED]", "tokens": "[FILTERED]", "name": "token"},
        "job": "app.jobs:token",
    }
    assert stored["kwargs"]["TOKEN"] == {"deep": 4}  # the stored payload is untouched


def test_a_dict_stored_in_its_tagged_form_is_filtered_by_its_string_keys():
    shown = argument_filter.ArgumentFilter.of(["password"])
    stored = {
        "_sq": "dict",
        "v": [[1, "one"], ["Password", "hunter2"], ["nested", {"password": 1}]],
    }

    assert shown.filtered(stored) == {
        "_sq": "dict",
        "v": [[1, "one"], ["Password", "[FILTERED]"], ["nested", {"password": "[FILTERED]"}]],
    }


def test_an_empty_list_filters_nothing():
    stored = {"kwargs": {"password": "hunter2"}}
    assert argument_filter.ArgumentFilter.of([]).filtered_payload(stored) is stored


def test_the_defaults_are_the_documented_words():
    settings = config.load_settings({})
    assert settings.filter_arguments.names == (
        "password",
        "secret",
        "token",
        "api_key",
        "authorization",
        "cookie",
    )


@pytest.mark.parametrize(
    "value", ["password", ["password", ""], ["password", 3], None, {"password": True}]
)
def test_a_bad_filter_setting_is_refused_naming_the_key(value):
    with pytest.raises(TypeError, match=r"SOLIDQ_FILTER_ARGUMENTS must be a list of non-empty"):
        config.load_settings({"SOLIDQ_FILTER_ARGUMENTS": value})
