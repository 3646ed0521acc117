"""``flask solidq batches / batch`` (and ``jobs --batch``) on every backend: the table of
batches with its filters and paging, one batch with its jobs by state, an unknown id. The
batches are made as the dashboard's batch tests make them."""

from __future__ import annotations

import shlex
import typing as t

import pytest

from tests.cli.test_job_commands import run
from tests.cli.test_job_commands import table_ids
from tests.dashboard.test_dashboard_batches import failed_batch
from tests.dashboard.test_dashboard_batches import open_batch
from tests.jobs import batch as batch_jobs
from tests.support import solidq

if t.TYPE_CHECKING:
    from flask import Flask


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[None]:
    batch_jobs.PERFORMED.clear()
    yield
    batch_jobs.PERFORMED.clear()


def rows(output: str) -> dict[str, list[str]]:
    """The rows of a `flask solidq batches` table by id, cut on runs of two spaces."""
    lines = [line.strip() for line in output.splitlines()]
    cells = [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in lines]
    return {row[0]: row for row in cells if row and row[0].isdigit()}


def fields(output: str) -> dict[str, str]:
    """The ``name  value`` lines of `flask solidq batch`, up to its metadata."""
    head = output.split("\nMetadata:", 1)[0].splitlines()[1:]
    pairs = [line.strip().split("  ", 1) for line in head if line.strip()]
    return {name: value.strip() for name, value in pairs}


def many_ready(app: Flask, count: int) -> tuple[int, list[int]]:
    with app.app_context():
        with solidq.batch() as batch:
            ids = [batch_jobs.work.perform_later(index).provider_job_id for index in range(count)]
        batch_jobs.work.perform_later("outside")
    return batch.id, ids


def test_batches_prints_each_batch_newest_first(app, engine):
    finished_id, _ = failed_batch(app, engine)
    open_id, _ = open_batch(app)

    result = run(app, "batches")

    assert result.exit_code == 0, result.output
    assert result.output.split()[:9] == [
        "ID",
        "STATUS",
        "COMPLETED/FAILED/PENDING",
        "OF",
        "TOTAL",
        "METADATA",
        "CALLBACKS",
        "ENQUEUED",
        "FINISHED",
    ]
    assert table_ids(result.output) == [open_id, finished_id]
    by_id = rows(result.output)
    assert by_id[str(finished_id)][1:5] == [
        "failed",
        "2/1/0 of 3",
        "catalog",
        "on_success: batch_test.callback, on_finish: batch_test.callback",
    ]
    assert by_id[str(finished_id)][5].endswith("ago") and by_id[str(finished_id)][6].endswith("ago")
    assert by_id[str(open_id)][1:5] == ["pending", "0/0/2 of 2", 'owner="ops", size=2', "-"]
    assert by_id[str(open_id)][-1] == "-"


@pytest.mark.parametrize(
    ("status", "which"), [("open", ["open"]), ("finished", ["failed"]), ("failed", ["failed"])]
)
def test_batches_status_filters(app, engine, status, which):
    ids = {"failed": failed_batch(app, engine)[0], "open": open_batch(app)[0]}

    result = run(app, "batches", "--status", status)

    assert result.exit_code == 0, result.output
    assert table_ids(result.output) == [ids[name] for name in which]


def test_batches_says_when_there_are_none_and_refuses_an_unknown_status(app, engine):
    assert run(app, "batches").output.strip() == "No batches."
    refused = run(app, "batches", "--status", "bogus")
    assert refused.exit_code == 2 and "bogus" in refused.output


def test_a_full_page_of_batches_ends_with_the_command_for_the_next_one(app, engine):
    ids = sorted((open_batch(app)[0] for _ in range(3)), reverse=True)

    first = run(app, "batches", "--status", "open", "--limit", 2)
    more = first.output.strip().splitlines()[-1]
    assert more == f"More: flask solidq batches --status open --limit 2 --before {ids[1]}"
    second = run(app, *shlex.split(more.removeprefix("More: flask solidq ")))

    assert table_ids(first.output) == ids[:2]
    assert table_ids(second.output) == ids[2:]


def test_batch_prints_its_counters_times_callbacks_metadata_and_jobs_by_state(app, engine):
    batch_id, jobs = failed_batch(app, engine)

    result = run(app, "batch", batch_id)

    assert result.exit_code == 0, result.output
    output = result.output
    assert output.splitlines()[0] == f"Batch {batch_id}"
    shown = fields(output)
    assert (shown["status"], shown["jobs"], shown["completed"]) == ("failed", "3", "2")
    assert (shown["failed"], shown["pending"]) == ("1", "0")
    assert shown["finished"].endswith("ago)") and shown["failed at"] == shown["finished"]
    assert shown["callback on_success"] == "batch_test.callback"
    assert shown["callback on_finish"] == "batch_test.callback"
    assert '"label": "catalog"' in output
    failed_part = output.split("Failed jobs:\n", 1)[1].split("Finished jobs:\n", 1)
    assert table_ids(failed_part[0]) == [jobs["failing"]]
    assert "tests.jobs.batch.Boom: failing 3" in failed_part[0]
    assert table_ids(failed_part[1]) == [jobs["second"], jobs["first"]]
    assert "Ready jobs:" not in output


def test_batch_pages_each_state_through_jobs_batch(app, engine):
    batch_id, ids = many_ready(app, 3)

    result = run(app, "batch", batch_id, "--limit", 2)
    more = result.output.strip().splitlines()[-1].strip()
    assert more == (
        f"More: flask solidq jobs --state ready --batch {batch_id} --limit 2 --before {ids[1]}"
    )
    rest = run(app, *shlex.split(more.removeprefix("More: flask solidq ")))

    assert table_ids(result.output) == [ids[2], ids[1]]
    assert table_ids(rest.output) == [ids[0]]


def test_jobs_batch_lists_only_the_batchs_jobs(app, engine):
    batch_id, ids = many_ready(app, 2)

    result = run(app, "jobs", "--state", "ready", "--batch", batch_id)

    assert table_ids(result.output) == sorted(ids, reverse=True)


def test_batch_says_when_there_is_no_such_batch(app, engine):
    result = run(app, "batch", 999_999)

    assert result.exit_code == 1
    assert "No batch 999999" in result.output and "flask solidq batches" in result.output
    assert run(app, "batch", "abc").exit_code == 2
    assert run(app, "batch", 2**63).exit_code == 2
    assert run(app, "jobs", "--batch", 2**63).exit_code == 2


def test_job_names_its_batch(app, engine):
    batch_id, jobs = open_batch(app)

    output = run(app, "job", jobs["ready"]).output

    assert f"batch            {batch_id} (flask solidq batch {batch_id})" in output
