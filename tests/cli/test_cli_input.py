"""``flask solidq`` refuses bad input before it asks or acts, on every backend: an id past a
``bigint`` or in other digits than 0-9, a name with a NUL or longer than its column, a
duration that isn't a finite number of seconds, a count in other digits or past its range.
Each is a usage error (exit status 2) naming the value and what is allowed, with no
traceback and nothing changed in the database. Also: ``retry`` with nothing to read on stdin
names ``--yes``; ``pause`` of a queue with no jobs yet pauses it and warns."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import identifiers
from flask_solidq import models
from tests import support
from tests.jobs import job_action as jobs
from tests.operations.test_job_actions import enqueue
from tests.operations.test_job_actions import failed_job
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from click.testing import Result
    from flask import Flask

#: The first number past a ``bigint``.
PAST_BIGINT = str(identifiers.MAX_ID + 1)
ID_RULE = f"0 to {identifiers.MAX_ID}, in the digits 0-9"
#: Every table the commands could change, read whole before and after a refusal.
TABLES = (
    models.JobRecord,
    models.FailedExecution,
    models.ReadyExecution,
    models.ScheduledExecution,
    models.Pause,
)


@pytest.fixture(autouse=True)
def clean_job_module() -> t.Iterator[None]:
    jobs.FAILURES.clear()
    yield
    jobs.FAILURES.clear()


def run(app: Flask, *args: str, input: str | None = None) -> Result:
    return app.test_cli_runner().invoke(args=["solidq", *args], input=input)


def snapshot(engine: sa.Engine) -> list[list[tuple[t.Any, ...]]]:
    return [[tuple(row) for row in support.rows(engine, table)] for table in TABLES]


def arabic_indic(number: int) -> str:
    """``number`` written in Arabic-Indic digits, which Python's ``int()`` reads."""
    return "".join(chr(0x0660 + int(digit)) for digit in str(number))


def assert_usage_error(result: Result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.output, result.output


BAD_IDS = [
    ("retry", PAST_BIGINT),
    ("retry", "--yes", "99999999999999999999999"),
    ("discard", PAST_BIGINT),
    ("run-now", PAST_BIGINT),
    ("job", PAST_BIGINT),
    ("job", "--", "-5"),
    ("retry", "+7"),
    ("jobs", "--batch", PAST_BIGINT),
    ("jobs", "--before", PAST_BIGINT),
    ("retry", "--all", "--batch", "-1"),
    ("discard", "--all", "--batch", PAST_BIGINT),
    ("batch", PAST_BIGINT),
    ("batches", "--before", PAST_BIGINT),
]


@pytest.mark.parametrize("args", BAD_IDS, ids=lambda args: " ".join(args)[:30])
def test_an_id_no_row_can_have_is_a_usage_error_before_anything_is_asked(app, engine, args):
    failed_job(app, engine, "broken")
    before = snapshot(engine)

    result = run(app, *args, input="y\n")

    assert_usage_error(result, repr(args[-1]), ID_RULE)
    assert "?" not in result.output.split("Error")[0]  # no prompt came first
    assert snapshot(engine) == before


@pytest.mark.parametrize(
    "command", [("retry", "--yes"), ("discard", "--yes"), ("job",), ("batch",)]
)
def test_an_id_in_arabic_indic_digits_is_refused_not_read_as_a_number(app, engine, command):
    job_id = failed_job(app, engine, "broken")
    before = snapshot(engine)

    result = run(app, *command, arabic_indic(job_id))

    assert_usage_error(result, repr(arabic_indic(job_id)), "digits 0-9")
    assert job_state(engine, job_id) == "failed"
    assert snapshot(engine) == before


def test_the_largest_id_is_taken_and_found_missing(app, engine):
    result = run(app, "job", str(identifiers.MAX_ID))

    assert result.exit_code == 1
    assert f"No job {identifiers.MAX_ID}." in result.output


BAD_NAMES = [
    ("pause", "mail\x00"),
    ("resume", "q" * 256),
    ("pause", "q" * 256),
    ("jobs", "--queue", "mail\x00"),
    ("jobs", "--job", "Send\x00Mail"),
    ("retry", "--all", "--queue", "q" * 300),
    ("discard", "--all", "--error-class", "Value\x00Error"),
    ("health", "--hostname", "host\x00"),
    ("job", "0123\x00abc"),
]


@pytest.mark.parametrize("args", BAD_NAMES, ids=lambda args: " ".join(args)[:30])
def test_a_name_the_database_cant_keep_is_a_usage_error(app, engine, args):
    failed_job(app, engine, "broken")
    before = snapshot(engine)

    result = run(app, *args, *(["--yes"] if args[0] in ("retry", "discard") else []))

    bad = args[-1]
    what = "NUL character" if "\x00" in bad else "at most 255"
    assert_usage_error(result, what, repr(bad[:40] + ("..." if len(bad) > 40 else "")))
    assert snapshot(engine) == before


BAD_DURATIONS = [
    ("clear-finished", "--older-than", "inf"),
    ("clear-finished", "--older-than", "nan"),
    ("clear-finished", "--older-than", "1e300"),
    ("clear-finished", "--older-than", "-1"),
    ("clear-finished", "--older-than", arabic_indic(60)),
    ("clear-idle-budgets", "--sleep-between-batches", "inf"),
    ("health", "--threshold", "nan"),
    ("health", "--threshold", "0"),
    ("work", "--polling-interval", "nan"),
]


@pytest.mark.parametrize("args", BAD_DURATIONS, ids=lambda args: " ".join(args)[:30])
def test_a_duration_that_isnt_a_finite_number_of_seconds_is_a_usage_error(app, engine, args):
    before = snapshot(engine)

    result = run(app, *args)

    assert_usage_error(result, repr(args[-1]), "number of seconds", "3153600000")
    assert snapshot(engine) == before


BAD_COUNTS = [
    ("clear-finished", "--batch-size", arabic_indic(10)),
    ("clear-finished", "--batch-size", str(2**40)),
    ("clear-idle-budgets", "--batch-size", "0"),
    ("status", "--failed", "-1"),
    ("health", "--supervisor-pid", str(2**40)),
    ("work", "--threads", arabic_indic(2)),
    ("jobs", "--limit", arabic_indic(5)),
    ("batches", "--limit", "0"),
]


@pytest.mark.parametrize("args", BAD_COUNTS, ids=lambda args: " ".join(args)[:30])
def test_a_count_out_of_range_or_in_other_digits_is_a_usage_error(app, engine, args):
    before = snapshot(engine)

    result = run(app, *args)

    assert_usage_error(result, args[-1])
    assert snapshot(engine) == before


def test_a_queue_list_naming_a_queue_with_a_nul_is_a_usage_error(app, engine):
    result = run(app, "work", "--queues", "mail,bad\x00name")

    assert_usage_error(result, "NUL character", "'bad\\x00name'")


def test_retry_with_nothing_to_read_on_stdin_names_yes_and_changes_nothing(app, engine):
    job_id = failed_job(app, engine, "broken")

    result = run(app, "retry", str(job_id), input="")

    assert_usage_error(result, "--yes", "Nothing was changed")
    assert job_state(engine, job_id) == "failed"


def test_discard_all_with_nothing_to_read_on_stdin_names_yes(app, engine):
    job_id = failed_job(app, engine, "broken")

    result = run(app, "discard", "--all", input="")

    assert_usage_error(result, "--yes")
    assert job_state(engine, job_id) == "failed"


def test_retry_answered_no_still_aborts_with_status_1(app, engine):
    job_id = failed_job(app, engine, "broken")

    result = run(app, "retry", str(job_id), input="n\n")

    assert result.exit_code == 1
    assert "Aborted" in result.output
    assert job_state(engine, job_id) == "failed"


def test_pausing_a_queue_with_no_jobs_yet_pauses_it_and_warns(app, engine):
    result = run(app, "pause", "nightly")

    assert result.exit_code == 0, result.output
    assert result.stdout == "Paused queue 'nightly'.\n"
    assert "queue 'nightly' has no jobs yet; paused anyway" in result.stderr
    assert [row.queue_name for row in support.rows(engine, models.Pause)] == ["nightly"]


def test_pausing_a_queue_that_has_jobs_doesnt_warn(app, engine):
    enqueue(app, jobs.task, "note", queue="mail")

    result = run(app, "pause", "mail")

    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout == "Paused queue 'mail'.\n"
