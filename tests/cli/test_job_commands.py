"""``flask solidq jobs / job / retry / discard / run-now`` on every backend: the tables they
print, one job whole with its backtrace, confirmation prompts, usage errors. The operations
under them are tested in tests/operations/test_job_actions.py; the jobs are made the same way."""

from __future__ import annotations

import shlex
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.reads import browse
from flask_solidq.reads import job_detail
from tests import support
from tests.jobs import job_action as jobs
from tests.jobs import rate_limit as rate_limit_jobs
from tests.operations.test_job_actions import blocked_job
from tests.operations.test_job_actions import deferred_job
from tests.operations.test_job_actions import detail
from tests.operations.test_job_actions import enqueue
from tests.operations.test_job_actions import failed_job
from tests.operations.test_job_actions import one_job_per_state
from tests.operations.test_job_actions import row
from tests.operations.test_job_actions import run_ready
from tests.operations.test_job_actions import scheduled_job
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from click.testing import Result
    from flask import Flask

FAILED = t.cast(sa.Table, models.FailedExecution.__table__)

#: The last column of `flask solidq jobs`, by state.
LAST_COLUMN = {
    browse.State.FAILED: "ERROR",
    browse.State.SCHEDULED: "DUE",
    browse.State.DEFERRED: "DUE",
    browse.State.FINISHED: "FINISHED",
    browse.State.READY: "ENQUEUED",
    browse.State.CLAIMED: "ENQUEUED",
    browse.State.BLOCKED: "ENQUEUED",
}


@pytest.fixture(autouse=True)
def clean_job_module() -> t.Iterator[None]:
    jobs.FAILURES.clear()
    jobs.PERFORMED.clear()
    yield
    jobs.FAILURES.clear()
    jobs.PERFORMED.clear()


def run(app: Flask, *args: t.Any, input: str | None = None) -> Result:
    return app.test_cli_runner().invoke(args=["solidq", *map(str, args)], input=input)


def table_ids(output: str) -> list[int]:
    """The ids in the first column of a `flask solidq jobs` table."""
    cells = [line.split() for line in output.splitlines()]
    return [int(row[0]) for row in cells if row and row[0].isdigit()]


def header(output: str) -> list[str]:
    return next(line.split() for line in output.splitlines() if line.split()[:1] == ["ID"])


# jobs


def test_jobs_lists_each_state_as_a_table(app, engine):
    by_state = one_job_per_state(app, engine)

    for state in browse.State:
        result = run(app, "jobs", "--state", state.value)
        assert result.exit_code == 0, result.output
        with engine.connect() as connection:
            expected = [job.id for job in browse.list_jobs(connection, state)]
        assert by_state[state] in expected
        assert table_ids(result.output) == expected, state
        assert header(result.output) == ["ID", "JOB", "QUEUE", "PRIORITY", LAST_COLUMN[state]]
    failed = run(app, "jobs")  # failed is the default
    (line,) = [
        line
        for line in failed.output.splitlines()
        if line.split()[:1] == [str(by_state[browse.State.FAILED])]
    ]
    assert "job_action_test.task" in line
    assert "builtins.ValueError: job_action_test.task failed on purpose for failed" in line
    assert "More:" not in failed.output


def test_jobs_filters_by_queue_and_job_and_says_when_there_are_none(app, engine):
    mail = enqueue(app, jobs.task, "mail", queue="mail")
    enqueue(app, jobs.other, "other", queue="mail")
    enqueue(app, jobs.task, "default")

    result = run(
        app, "jobs", "--state", "ready", "--queue", "mail", "--job", "job_action_test.task"
    )
    assert result.exit_code == 0, result.output
    assert table_ids(result.output) == [mail]
    none = run(app, "jobs", "--state", "ready", "--queue", "nowhere")
    assert none.output.strip() == "No ready jobs."
    assert run(app, "jobs").output.strip() == "No failed jobs."


def test_an_empty_scheduled_list_names_the_jobs_their_rate_limit_deferred_and_how_to_list_them(
    app, engine
):
    # A rate-limited backlog: one claim admits the first job, its budget defers the rest.
    ids = [enqueue(app, rate_limit_jobs.global_job, f"call-{index}") for index in range(4)]
    batch = support.claim_everything(engine, process_id=7)
    assert [job.id for job in batch.jobs] == ids[:1]
    assert len(batch.deferrals) == 3

    scheduled = run(app, "jobs", "--state", "scheduled")

    assert scheduled.exit_code == 0, scheduled.output
    assert scheduled.output.strip() == (
        "No scheduled jobs. 3 jobs wait for their rate limit: flask solidq jobs --state deferred"
    )
    deferred = run(app, "jobs", "--state", "deferred")
    assert table_ids(deferred.output) == sorted(ids[1:], reverse=True)
    assert "Not listed" not in deferred.output
    # The filters go with the hint, and count with it.
    filtered = run(app, "jobs", "--state", "scheduled", "--job", "rate_test.global")
    assert filtered.output.strip() == (
        "No scheduled jobs. 3 jobs wait for their rate limit:"
        " flask solidq jobs --state deferred --job rate_test.global"
    )
    other = run(app, "jobs", "--state", "scheduled", "--queue", "elsewhere")
    assert other.output.strip() == "No scheduled jobs."


def test_a_list_says_how_many_jobs_wait_in_the_state_they_are_mistaken_for(app, engine):
    later = scheduled_job(app, "later")
    deferred = deferred_job(app, engine, "deferred")
    ready, blocked = blocked_job(app, "acct")

    scheduled = run(app, "jobs", "--state", "scheduled")
    assert table_ids(scheduled.output) == [later]
    assert scheduled.output.rstrip().endswith(
        "\n\nNot listed: 1 job waits for its rate limit: flask solidq jobs --state deferred"
    )
    back = run(app, "jobs", "--state", "deferred")
    assert table_ids(back.output) == [deferred]
    assert back.output.rstrip().endswith(
        "\n\nNot listed: 1 job is scheduled for later (wait=, a retry's wait, a debounce):"
        " flask solidq jobs --state scheduled"
    )
    ready_list = run(app, "jobs", "--state", "ready")
    assert table_ids(ready_list.output) == [ready]
    assert ready_list.output.rstrip().endswith(
        "\n\nNot listed: 1 job waits for a concurrency slot: flask solidq jobs --state blocked"
    )
    # A later page doesn't repeat it; the states nobody mistakes get none.
    assert "Not listed" not in run(app, "jobs", "--state", "ready", "--before", ready + 1).output
    assert "Not listed" not in run(app, "jobs", "--state", "blocked").output
    assert table_ids(run(app, "jobs", "--state", "blocked").output) == [blocked]


def test_a_full_page_ends_with_the_command_for_the_next_one(app, engine):
    ids = [failed_job(app, engine, f"job-{index}", queue="q") for index in range(5)]
    newest_first = sorted(ids, reverse=True)

    first = run(app, "jobs", "--queue", "q", "--limit", 2)
    assert table_ids(first.output) == newest_first[:2]
    more = first.output.strip().splitlines()[-1]
    assert (
        more
        == f"More: flask solidq jobs --state failed --queue q --limit 2 --before {newest_first[1]}"
    )

    seen = table_ids(first.output)
    while more.startswith("More: "):
        page = run(app, *shlex.split(more.removeprefix("More: flask solidq ")))
        assert page.exit_code == 0, page.output
        seen += table_ids(page.output)
        more = page.output.strip().splitlines()[-1]
    assert seen == newest_first


# job


def test_job_shows_a_failed_job_whole_with_its_full_backtrace(app, engine):
    jobs.FAILURES["broken"] = KeyError
    job_id = enqueue(app, jobs.task, "broken", queue="mail", priority=4)
    run_ready(app, engine)
    found = detail(engine, job_id)
    error = t.cast(job_detail.Error, found.error)
    assert len(error.backtrace) > 3

    for reference in (job_id, found.summary.active_job_id):
        result = run(app, "job", reference)
        assert result.exit_code == 0, result.output
        output = result.output
        assert output.splitlines()[0] == f"Job {job_id}"
        fields = dict(line.split(None, 1) for line in output.splitlines()[1:5] if line.strip())
        assert fields["job"].strip() == "job_action_test.task"
        assert fields["job_id"].strip() == found.summary.active_job_id
        assert fields["state"].strip() == "failed"
        assert fields["queue"].strip() == "mail (priority 4)"
        assert "executions" in output
        assert '"broken"' in output  # the payload, arguments and all
        assert "Error (" in output and "builtins.KeyError" in output
        assert "failed on purpose for broken" in output
        backtrace = output.split("Backtrace:\n", 1)[1].splitlines()
        assert [line.removeprefix("  ") for line in backtrace] == error.backtrace


def test_job_shows_a_pending_coalesced_jobs_key_and_calls(app, engine):
    with app.app_context():
        calls = [jobs.collect.perform_later("acct", index) for index in range(2)]

    output = run(app, "job", calls[0].provider_job_id).output

    assert "state" in output and "ready" in output
    assert "(open)" in output
    assert "collected calls  2" in output
    assert "Backtrace" not in output


def test_job_says_when_there_is_no_such_job(app, engine):
    result = run(app, "job", 999_999)

    assert result.exit_code == 1
    assert "No job 999999." in result.output


# retry


def test_retry_asks_first_and_no_retries_nothing(app, engine):
    job_id = failed_job(app, engine, "broken")

    refused = run(app, "retry", job_id, input="n\n")
    assert refused.exit_code == 1
    assert "Retry 1 job?" in refused.output
    assert "Aborted" in refused.output
    assert job_state(engine, job_id) == "failed"

    agreed = run(app, "retry", job_id, input="y\n")
    assert agreed.exit_code == 0, agreed.output
    assert "Retried 1 job." in agreed.output
    assert job_state(engine, job_id) == "ready"


def test_retry_yes_doesnt_ask_and_says_when_a_named_job_isnt_failed(app, engine):
    job_id = failed_job(app, engine, "broken")
    uuid = row(engine, job_id).active_job_id

    result = run(app, "retry", uuid, "--yes")
    assert result.exit_code == 0, result.output
    assert "?" not in result.output
    assert result.output.strip() == "Retried 1 job."
    assert job_state(engine, job_id) == "ready"

    again = run(app, "retry", job_id, "--yes")
    assert again.exit_code == 0, again.output
    assert again.output.strip() == "Retried 0 jobs. None of the named jobs is failed now."


def test_retry_all_by_error_class(app, engine):
    values = [failed_job(app, engine, f"value-{index}", error=ValueError) for index in range(2)]
    key = failed_job(app, engine, "key", error=KeyError)

    asked = run(app, "retry", "--all", "--error-class", "ValueError", input="n\n")
    assert "Retry 2 jobs?" in asked.output
    assert support.count(engine, FAILED) == 3

    result = run(app, "retry", "--all", "--error-class", "ValueError", "--yes")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "Retried 2 jobs."
    assert [job_state(engine, job_id) for job_id in values] == ["ready", "ready"]
    assert job_state(engine, key) == "failed"


def test_retry_all_takes_the_time_format_the_readme_shows(app, engine):
    job_id = failed_job(app, engine, "broken", error=TimeoutError)

    # The README's example: flask solidq retry --all --error-class TimeoutError
    # --failed-after "2026-11-30 09:00" --yes (minutes, no seconds).
    result = run(
        app,
        "retry",
        "--all",
        "--error-class",
        "TimeoutError",
        "--failed-after",
        "2000-11-30 09:00",
        "--yes",
    )

    assert result.exit_code == 0, result.output
    assert job_state(engine, job_id) == "ready"


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="neither ids nor --all"),
        pytest.param(["{id}", "--queue", "default"], id="ids with a filter"),
        pytest.param(
            ["{id}", "--error-class", "ValueError", "--yes"], id="ids with an error class"
        ),
    ],
)
def test_retry_usage_errors(app, engine, args):
    job_id = failed_job(app, engine, "broken")

    result = run(app, "retry", *[arg.format(id=job_id) for arg in args])

    assert result.exit_code == 2, result.output
    assert "Usage:" in result.output
    assert job_state(engine, job_id) == "failed"


def test_retry_with_ids_and_all_is_a_usage_error(app, engine):
    # Named jobs and --all: which did the person mean? Retrying every failed job is the
    # bigger of the two guesses.
    named = failed_job(app, engine, "named")
    other = failed_job(app, engine, "other")

    result = run(app, "retry", named, "--all", "--yes")

    assert result.exit_code == 2, result.output
    assert job_state(engine, other) == "failed"


# discard


def test_discard_all_of_one_state(app, engine):
    failed = failed_job(app, engine, "failed")
    scheduled = [scheduled_job(app, f"later-{index}") for index in range(2)]
    ready = enqueue(app, jobs.task, "ready")

    asked = run(app, "discard", "--all", "--state", "scheduled", input="n\n")
    assert "Discard 2 scheduled jobs?" in asked.output
    result = run(app, "discard", "--all", "--state", "scheduled", "--yes")

    assert result.exit_code == 0, result.output
    assert result.output.strip() == "Discarded 2 jobs."
    assert [job_state(engine, job_id) for job_id in scheduled] == ["gone", "gone"]
    assert job_state(engine, failed) == "failed"
    assert job_state(engine, ready) == "ready"


def test_discard_named_jobs_asks_first(app, engine):
    failed = failed_job(app, engine, "failed")
    ready = enqueue(app, jobs.task, "ready")

    refused = run(app, "discard", failed, ready, input="n\n")
    assert refused.exit_code == 1
    assert "Discard 2 jobs?" in refused.output
    assert job_state(engine, failed) == "failed"

    result = run(app, "discard", failed, ready, input="y\n")
    assert result.exit_code == 0, result.output
    assert "Discarded 2 jobs." in result.output
    assert job_state(engine, failed) == job_state(engine, ready) == "gone"


def test_discard_rejects_an_unknown_state(app, engine):
    result = run(app, "discard", "--all", "--state", "claimed", "--yes")

    assert result.exit_code == 2
    assert "claimed" in result.output


# run-now


def test_run_now_makes_a_scheduled_job_ready(app, engine):
    scheduled = scheduled_job(app, "later")
    ready = enqueue(app, jobs.task, "ready")

    result = run(app, "run-now", scheduled)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "Made 1 job due now."
    assert job_state(engine, scheduled) == "ready"

    again = run(app, "run-now", scheduled, ready)
    assert again.output.strip() == "Made 0 jobs due now. None of the named jobs is scheduled now."
    assert run(app, "run-now").exit_code == 2
