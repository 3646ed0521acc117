"""Steps that resume on the job page and in ``flask solidq job ID`` (issue 21, item 10): the
steps done, the current one with its cursor, and the resumptions, read from the payload a job
interrupted by a stopping worker saved."""

from __future__ import annotations

import typing as t

import pytest

from tests import support
from tests.dashboard.test_dashboard import PREFIX
from tests.dashboard.test_dashboard import Page
from tests.jobs import steps as jobs
from tests.operations.test_steps import after_items
from tests.operations.test_steps import later
from tests.operations.test_steps import run

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
    assert "Steps done prepare Current step walk (cursor 5) Resumptions 1" in text


def test_flask_solidq_job_shows_the_steps(app, interrupted):
    result = app.test_cli_runner().invoke(args=["solidq", "job", str(interrupted)])

    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.output.splitlines()]
    assert "steps done prepare" in lines
    assert "current step walk (cursor 5)" in lines
    assert "resumptions 1" in lines


def test_a_job_without_steps_shows_no_steps(app, engine):
    job_id = later(app, jobs.twice)

    response = app.test_client().get(f"{PREFIX}/jobs/{job_id}")
    output = app.test_cli_runner().invoke(args=["solidq", "job", str(job_id)]).output

    assert "Steps done" not in Page(response.text).text
    assert "steps done" not in output
