"""One name per thing: ``flask solidq status`` and ``flask solidq jobs`` name their columns as
the dashboard's pages do, and say a budget's next admission with the same words, read by one
function (:func:`flask_solidq.reads.control_reads.next_admission_at`), on every backend.
"""

from __future__ import annotations

import datetime as dt
import re
import typing as t

import pytest

from flask_solidq.testing import frozen_clock
from tests import support
from tests.dashboard.test_dashboard_browser import filled_dashboard
from tests.dashboard.test_dashboard_control_pages import claim_all
from tests.dashboard.test_dashboard_control_pages import later
from tests.dashboard.test_dashboard_control_pages import tables
from tests.jobs import rate_limit as rate_limit_jobs

if t.TYPE_CHECKING:
    from flask import Flask

START = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
GLOBAL_BUDGET = "rate_test.global/global"


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    """An app with the dashboard open (testing mode)."""
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


def cli(app: Flask, *args: str) -> str:
    result = app.test_cli_runner().invoke(args=["solidq", *args])
    assert result.exit_code == 0, result.output
    return result.output


def section(output: str, title: str) -> list[list[str]]:
    """A table of the CLI's ``output`` (the one under the line ``title``, or the first one
    with an empty ``title``): its rows, cells split on the two spaces between columns."""
    text = output.split(f"{title}\n", 1)[1] if title else output
    lines = text.split("\n\n", 1)[0].rstrip().splitlines()
    return [re.split(r"(?<=\S)\s{2,}", line.strip()) for line in lines]


def headers(app: Flask, path: str, index: int = 0) -> list[str]:
    """The headers of the ``index``-th table of a dashboard page, in the CLI's capitals."""
    response = app.test_client().get(path)
    assert response.status_code == 200
    found = re.findall(r"<thead>(.*?)</thead>", response.get_data(as_text=True), re.S)
    cells = re.findall(r"<th[^>]*>(.*?)</th>", found[index], re.S)
    return [re.sub(r"<[^>]+>", "", cell).strip().upper() for cell in cells]


def test_the_cli_and_the_dashboard_say_the_same_next_admission_on_a_frozen_clock(app, engine):
    with frozen_clock(START) as clock:
        for note in ("admitted", "first deferred", "second deferred"):
            later(app, rate_limit_jobs.global_job, note)  # one a minute
        assert len(claim_all(engine).deferrals) == 2
        clock.advance(10)

        (cli_row,) = section(cli(app, "status"), "Rate-limited jobs")[1:]
        (page_row,) = [row for row in tables(app.test_client(), "/solidq/budgets")[0] if row["Key"]]

    key, _limit, available, deferred, next_admission, next_slot = cli_row
    assert (key, available, deferred) == (GLOBAL_BUDGET, "0", "2")
    assert (page_row["Key"], page_row["Deferred"]) == (key, deferred)
    # The budget is spent for the minute, and the first deferred job's slot is then: both
    # say it in the same words, and the sentence beside it too.
    assert next_admission == page_row["Next admission"] == "in 50s"
    assert next_slot == page_row["Next slot"] == "in 50s"
    assert page_row["Now"] == (
        "Draining 2 deferred jobs one slot at a time: the next is admitted in 50s."
    )


def test_the_cli_names_its_columns_as_the_dashboard_does(app, engine):
    filled_dashboard(app, engine)  # a job in every state, a budget, a key, a process
    status = cli(app, "status")

    queues = section(status, "Queues")[0]
    overview = headers(app, "/solidq/")
    assert queues[:7] == overview[:7]  # QUEUE, READY, ..., CLAIMED, BLOCKED, FAILED
    assert overview[7].startswith("FINISHED") and queues[8:] == overview[8:10]
    # The page's buttons have their column; the CLI's are its commands (quiet, stop).
    assert section(status, "Processes")[0] == [
        name for name in headers(app, "/solidq/processes") if name != "ACTIONS"
    ]
    failed_list = headers(app, "/solidq/jobs?state=failed")
    assert set(section(status, "Failed jobs (latest 1)")[0]) < set(failed_list)
    budgets = section(status, "Rate-limited jobs")[0]
    assert [name for name in budgets if name != "AVAILABLE"] == [
        name for name in headers(app, "/solidq/budgets") if name != "NOW"
    ]
    assert section(status, "Blocked jobs")[0] == headers(app, "/solidq/concurrency")[:2]
    assert section(status, "Semaphores")[0] == headers(app, "/solidq/concurrency", 1)
    assert section(status, "Coalescing")[0] == headers(app, "/solidq/coalescing")
    for state in ("failed", "deferred", "scheduled", "claimed"):
        listed = section(cli(app, "jobs", "--state", state), "")[0]
        assert listed == headers(app, f"/solidq/jobs?state={state}")[: len(listed)], state
