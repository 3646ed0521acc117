"""The dashboard's job page says why a job waits and until when (a paused queue, a
concurrency key's slot and who holds it, a rate-limit budget's next admission, an open
coalesce key's max_wait), on every backend."""

from __future__ import annotations

import html
import re
import typing as t

import pytest

from flask_solidq.operations import claim
from tests import support
from tests.jobs import coalesce as coalesce_jobs
from tests.jobs import concurrency as concurrency_jobs
from tests.jobs import rate_limit as rate_limit_jobs
from tests.jobs import worker as worker_jobs

if t.TYPE_CHECKING:
    from flask import Flask

PROCESS_ID = 7373


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    """Overrides conftest's ``app``: the dashboard on (testing mode opens it)."""
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


@pytest.fixture(autouse=True)
def _push_request_context() -> None:
    """No request context pushed around the test (pytest-flask's): each client request gets
    its own, as a served app's do."""


def why(app: Flask, job_id: int) -> list[str]:
    """The reasons the job's page gives, as text."""
    page = app.test_client().get(f"/solidq/jobs/{job_id}").get_data(as_text=True)
    section = re.search(r'<section id="why">(.*?)</section>', page, re.S)
    assert section, page
    return [html.unescape(item) for item in re.findall(r"<li>(.*?)</li>", section.group(1))]


def enqueue(app: Flask, definition: t.Any, *args: t.Any) -> int:
    with app.app_context():
        return t.cast(int, definition.perform_later(*args).provider_job_id)


def test_a_ready_job_in_a_paused_queue_says_the_queue_is_paused(app, engine):
    job_id = enqueue(app, worker_jobs.record, 1)
    with app.app_context():
        support.solidq.pause("default")
    assert why(app, job_id) == [
        "Its queue default is paused: workers claim nothing from it until it is resumed."
    ]
    with app.app_context():
        support.solidq.resume("default")
    assert why(app, job_id) == ["It is ready: the next idle worker of its queue claims it."]


def test_a_blocked_job_names_its_concurrency_key_and_the_job_holding_the_slot(app, engine):
    holder = enqueue(app, concurrency_jobs.limited, "acct-1")
    blocked = enqueue(app, concurrency_jobs.limited, "acct-1")
    (reason,) = why(app, blocked)
    assert reason.startswith(
        "It waits for a slot of the concurrency key concurrency_test.limited/acct-1, held by"
        " jobs not running yet (ready) or gone (until the lease ends); its lease ends at "
    )
    support.register_claimers(engine, [PROCESS_ID])
    claimed = claim.claim_batch(engine, claim.QueueSelector(("*",)), 10, PROCESS_ID).jobs
    assert [job.id for job in claimed] == [holder]
    (reason,) = why(app, blocked)
    assert reason.startswith(
        "It waits for a slot of the concurrency key concurrency_test.limited/acct-1, held by"
        f" running jobs {holder}; its lease ends at "
    )


def test_a_deferred_job_says_when_its_budget_admits_the_next_claim(app, engine):
    enqueue(app, rate_limit_jobs.global_job, "first")
    deferred = enqueue(app, rate_limit_jobs.global_job, "second")
    support.register_claimers(engine, [PROCESS_ID])
    batch = claim.claim_batch(engine, claim.QueueSelector(("*",)), 10, PROCESS_ID)
    assert [entry.job.id for entry in batch.deferrals] == [deferred]
    (reason,) = why(app, deferred)
    assert reason.startswith(
        "It waits for the rate limit rate_test.global/global (1 job waits on it): the budget"
        " admits its next claim at "
    )
    assert "and this job's slot is at" in reason
    assert re.search(r"so it is admitted (now|at \S+ \S+ UTC)\.$", reason), reason


def test_a_debounced_job_still_taking_calls_says_its_max_wait_deadline(app, engine):
    job_id = enqueue(app, coalesce_jobs.debounced, "a")
    reasons = why(app, job_id)
    assert reasons[0].startswith("It is scheduled: due at ")
    assert reasons[1].startswith(
        "It still takes calls under the coalesce key coalesce_test.debounced/all: each call"
        " moves it to 30 s after the call, no later than "
    )
    assert reasons[1].endswith("UTC (max_wait).")


def test_a_job_under_stacked_limits_says_which_budget_admits_it_last(app, engine):
    from tests.jobs import rate_limit_stacked as stacked_jobs

    enqueue(app, stacked_jobs.hourly_tight, "first")
    deferred = enqueue(app, stacked_jobs.hourly_tight, "second")
    support.register_claimers(engine, [PROCESS_ID])
    batch = claim.claim_batch(engine, claim.QueueSelector(("*",)), 10, PROCESS_ID)
    assert [entry.job.id for entry in batch.deferrals] == [deferred]

    (reason,) = why(app, deferred)

    assert reason.startswith(
        "It waits for the rate limit stacked_test.hourly_tight/hourly/global, the last of its 2"
        " limits to admit it: the budget admits its next claim at "
    )


def test_a_job_counted_in_units_says_how_many_units_it_waits_for(app, engine):
    from tests.jobs import rate_limit_stacked as stacked_jobs

    enqueue(app, stacked_jobs.tokens, 90)
    deferred = enqueue(app, stacked_jobs.tokens, 20)
    support.register_claimers(engine, [PROCESS_ID])
    claim.claim_batch(engine, claim.QueueSelector(("*",)), 10, PROCESS_ID)

    (reason,) = why(app, deferred)

    assert reason.startswith(
        "It waits for the rate limit stacked_test.tokens/openai (1 job waits on it): the budget"
        " admits its next 20 units at "
    )
