"""Steps that resume on the job page and in ``flask solidq job ID`` (issue 21, item 10; issue
34): each step reached with its state (done, or in progress at its cursor), that later ones
are not reached yet, and the resumptions, read from the payload a job interrupted by a
stopping worker saved; a job failed with its dead worker shows the run it failed in."""

from __future__ import annotations

import re
import typing as t

import pytest

from tests import support
from tests.dashboard.test_dashboard import PREFIX
from tests.dashboard.test_dashboard import Page
from tests.jobs import steps as jobs
from tests.steps.test_steps import after_items
from tests.steps.test_steps import die
from tests.steps.test_steps import later
from tests.steps.test_steps import run
from tests.steps.test_steps import store_progress

if t.TYPE_CHECKING:
    from flask import Flask


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    """The dashboard on (testing mode opens it)."""
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


@pytest.fixture
def interrupted(app, engine) -> t.Iterator[int]:
    """A Walk job interrupted at step 'walk', cursor 3, then resumed and interrupted again at
    cursor 5: ready, with one resumption."""
    jobs.DONE.clear()
    job_id = later(app, jobs.Walk, 10)
    run(app, engine, stopping=after_items(4))
    run(app, engine, stopping=after_items(6))
    yield job_id
    jobs.DONE.clear()


def test_the_job_page_shows_steps_done_the_current_step_with_its_cursor_and_resumptions(
    app, interrupted
):
    response = app.test_client().get(f"{PREFIX}/jobs/{interrupted}")

    assert response.status_code == 200
    text = Page(response.text).text
    assert (
        "Steps prepare: done walk: in progress at cursor 5 later steps: not reached yet"
        " Resumptions 1"
    ) in text


def test_flask_solidq_job_shows_the_steps(app, interrupted):
    result = app.test_cli_runner().invoke(args=["solidq", "job", str(interrupted)])

    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.output.splitlines()]
    assert "resumptions 1" in lines
    steps = lines.index("Steps:")
    assert lines[steps + 1 : steps + 4] == [
        "prepare done",
        "walk in progress at cursor 5",
        "later steps not reached yet",
    ]


def test_a_job_without_steps_shows_no_steps(app, engine):
    job_id = later(app, jobs.twice)

    response = app.test_client().get(f"{PREFIX}/jobs/{job_id}")
    output = app.test_cli_runner().invoke(args=["solidq", "job", str(job_id)]).output

    assert "Steps" not in Page(response.text).text
    assert "Steps:" not in output


def test_a_job_failed_with_its_dead_worker_shows_where_and_in_which_run(app, engine):
    jobs.DONE.clear()
    job_id = later(app, jobs.LimitedWalk, 10)
    run(app, engine, stopping=after_items(4))
    store_progress(engine, job_id, resumptions=1, executions=2)
    die(app, engine, "fail")

    page = Page(app.test_client().get(f"{PREFIX}/jobs/{job_id}").text).text
    output = app.test_cli_runner().invoke(args=["solidq", "job", str(job_id)]).output

    assert "walk: in progress at cursor 3" in page
    assert re.search(r"Run Failed at Error Message 2 \d{4}-", page)  # its run, not "-"
    assert "It stopped at step 'walk' (cursor 3)" in page
    assert "run 2" in output
    assert "run ?" not in output
