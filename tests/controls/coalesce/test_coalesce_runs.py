"""What a coalesced job does when it runs (seed 003, the worker's side), on every backend: the
start frees the key (if it still points at the job) and reads the job's latest payload and
calls; a collecting job gets its calls, skips the ones whose records are gone, keeps them
through retries and failures; a job whose definition changed since it was stored; a worker
that died before the start; discarding a pending job; other adapters; what counts as waiting.

Jobs are claimed, performed and finished in-process (the helpers of
:mod:`tests.controls.concurrency.test_concurrency_controls`), on a real database.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import CoalesceStatus
from flask_solidq import CollectedJobMismatch
from flask_solidq import DeserializationError
from flask_solidq import SerializationError
from flask_solidq import models
from flask_solidq import signals
from flask_solidq import testing
from flask_solidq.definitions.arguments import import_path
from flask_solidq.operations import release
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.operations.outcomes import failure_json
from tests import support
from tests.controls.concurrency.test_concurrency_controls import PROCESS_ID
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import finish
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.jobs import coalesce_run as jobs
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
KEYS = t.cast(sa.Table, models.CoalesceKey.__table__)
CALLS = t.cast(sa.Table, models.CoalescedCall.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)
SOLIDQ_TABLES = (JOBS, KEYS, CALLS, models.ReadyExecution.__table__)


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    recorded = (jobs.PERFORMED, jobs.CALLS, jobs.SEEN, jobs.INNER)
    for found in recorded:
        found.clear()
    yield jobs.PERFORMED
    for found in recorded:
        found.clear()


@pytest.fixture
def products(app: Flask, engine: sa.Engine) -> t.Iterator[type[jobs.Product]]:
    """The app's own table of products, in the queue's database."""
    jobs.Base.metadata.create_all(engine)
    yield jobs.Product
    jobs.Base.metadata.drop_all(engine)


@contextlib.contextmanager
def sent(signal: t.Any) -> t.Iterator[list[dict[str, t.Any]]]:
    """The payloads ``signal`` sends inside the block."""
    payloads: list[dict[str, t.Any]] = []

    def receiver(sender: t.Any, **payload: t.Any) -> None:
        payloads.append(payload)

    with signal.connected_to(receiver):
        yield payloads


def later(app: Flask, definition: t.Any, *args: t.Any, **kwargs: t.Any) -> t.Any:
    """Enqueue ``definition(*args, **kwargs)``; return the job instance."""
    with app.app_context():
        return definition.perform_later(*args, **kwargs)


def run(app: Flask, engine: sa.Engine, limit: int = 1) -> list[Outcome]:
    """Claim up to ``limit`` ready jobs, perform them and store their outcomes."""
    outcomes = perform(app, claim(engine, limit))
    finish(engine, outcomes)
    return outcomes


def run_one(app: Flask, engine: sa.Engine) -> Outcome:
    (outcome,) = run(app, engine)
    return outcome


def key_rows(engine: sa.Engine) -> dict[str, int]:
    """coalesce key -> the id of its open job."""
    return {row.key: row.job_id for row in support.rows(engine, KEYS)}


def call_ids(engine: sa.Engine, job_id: int | None = None) -> list[int]:
    """The ids of the stored calls (of ``job_id``), oldest first."""
    where = [] if job_id is None else [CALLS.c.job_id == job_id]
    return [row.id for row in support.rows(engine, CALLS, *where)]


def failure(engine: sa.Engine, job_id: int) -> dict[str, t.Any]:
    """The stored error of a failed job."""
    (row,) = support.rows(engine, FAILED, FAILED.c.job_id == job_id)
    return t.cast(dict[str, t.Any], json.loads(row.error))


def class_path(error: type[BaseException]) -> str:
    return f"{error.__module__}.{error.__qualname__}"


def switch_definition(engine: sa.Engine, job_id: int, definition: t.Any) -> None:
    """Point a stored job at another definition, as a deploy that changed its declaration
    would: its class name and the payload's import path. The payload keeps how the job was
    opened (its ``coalesce`` marker, first)."""
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    payload = json.loads(row.arguments)
    payload["job"] = import_path(definition)
    with engine.begin() as connection:
        connection.execute(
            JOBS.update()
            .where(JOBS.c.id == job_id)
            .values(
                class_name=definition.job_name,
                arguments=json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
            )
        )


def waiting_job_ids(engine: sa.Engine) -> list[int]:
    """The job ids of the calls ``CoalescedCall.waiting()`` selects, one per call."""
    waiting = models.CoalescedCall.waiting().subquery()
    with engine.connect() as connection:
        return sorted(connection.scalars(sa.select(waiting.c.job_id)))


# The start frees the key, only if it still points at the job.


def test_a_call_after_the_claim_but_before_the_start_is_discarded_into_the_claimed_job(
    app, engine, performed
):
    first = later(app, jobs.dedupe, 1, "first")
    claimed = claim(engine)
    assert [job.id for job in claimed] == [first.provider_job_id]

    second = later(app, jobs.dedupe, 1, "second")
    assert second.coalesce_status is CoalesceStatus.DISCARDED
    assert second.provider_job_id == first.provider_job_id

    finish(engine, perform(app, claimed))
    assert performed == [("coalesce_run_test.dedupe", (1, "first"))]
    assert key_rows(engine) == {}

    third = later(app, jobs.dedupe, 1, "third")
    assert third.coalesce_status is CoalesceStatus.CREATED
    assert third.provider_job_id != first.provider_job_id
    assert key_rows(engine) == {"coalesce_run_test.dedupe/1": third.provider_job_id}


def test_a_call_made_while_the_job_runs_opens_the_next_job(app, engine, performed):
    first = later(app, jobs.dedupe, 2, "reenter")
    run_one(app, engine)

    (inner,) = jobs.INNER
    assert inner.coalesce_status is CoalesceStatus.CREATED
    assert inner.provider_job_id != first.provider_job_id
    assert key_rows(engine) == {"coalesce_run_test.dedupe/2": inner.provider_job_id}

    run_one(app, engine)
    assert performed == [
        ("coalesce_run_test.dedupe", (2, "reenter")),
        ("coalesce_run_test.dedupe", (2, "inner")),
    ]


def test_a_start_frees_the_key_only_if_it_still_points_at_that_job(app, engine, performed):
    # max_calls=2: B seals job 1, C opens job 2.
    a = later(app, jobs.collect_pairs, 3, "A")
    later(app, jobs.collect_pairs, 3, "B")
    c = later(app, jobs.collect_pairs, 3, "C")
    assert c.coalesce_status is CoalesceStatus.CREATED
    job_1, job_2 = a.provider_job_id, c.provider_job_id

    assert run_one(app, engine).claimed.id == job_1
    assert key_rows(engine) == {"coalesce_run_test.collect_pairs/3": job_2}
    d = later(app, jobs.collect_pairs, 3, "D")
    assert d.coalesce_status is CoalesceStatus.COLLECTED
    assert d.provider_job_id == job_2

    assert run_one(app, engine).claimed.id == job_2
    assert key_rows(engine) == {}
    e = later(app, jobs.collect_pairs, 3, "E")
    assert e.coalesce_status is CoalesceStatus.CREATED
    assert e.provider_job_id not in (job_1, job_2)
    assert [[args for _id, args, _kwargs in calls] for _name, calls in performed] == [
        [(3, "A"), (3, "B")],
        [(3, "C"), (3, "D")],
    ]


# Replacing arguments.


def test_a_replacement_admitted_after_the_claim_runs_in_that_run(app, engine, performed):
    first = later(app, jobs.replace, 7, "old")
    claimed = claim(engine)
    latest = later(app, jobs.replace, 7, "new")
    assert latest.coalesce_status is CoalesceStatus.REPLACED
    assert latest.provider_job_id == first.provider_job_id

    finish(engine, perform(app, claimed))
    assert performed == [("coalesce_run_test.replace", (7, "new"))]

    after = later(app, jobs.replace, 7, "after")
    assert after.coalesce_status is CoalesceStatus.CREATED
    assert after.provider_job_id != first.provider_job_id


# Collecting calls.


def test_a_collecting_job_receives_its_calls_oldest_first_with_ids_and_arguments(app, engine):
    first = later(app, jobs.collect, 5, 1)
    later(app, jobs.collect, 5, 2, note="x")
    later(app, jobs.collect, 5, 3)
    stored = call_ids(engine, first.provider_job_id)
    assert len(stored) == 3

    assert run_one(app, engine).kind is OutcomeKind.FINISHED
    (calls,) = jobs.CALLS
    assert [call.id for call in calls] == stored
    assert [call.args for call in calls] == [(5, 1), (5, 2), (5, 3)]
    assert [call.kwargs for call in calls] == [{}, {"note": "x"}, {}]
    assert [call.arguments for call in calls] == [call.args for call in calls]


def test_each_call_s_job_data_is_the_read_only_payload_of_its_own_request(app, engine):
    first = later(app, jobs.collect, 6, "a")
    with app.app_context():
        second = jobs.collect.set(priority=4, queue="other").perform_later(6, "b")
    assert second.provider_job_id == first.provider_job_id

    run_one(app, engine)
    (calls,) = jobs.CALLS
    data = [call.job_data for call in calls]
    assert [item["args"] for item in data] == [[6, "a"], [6, "b"]]
    assert [item["job_id"] for item in data] == [first.job_id, second.job_id]
    assert [item["queue_name"] for item in data] == ["default", "other"]
    assert [item["priority"] for item in data] == [0, 4]
    assert dt.datetime.fromisoformat(data[0]["enqueued_at"]) <= dt.datetime.fromisoformat(
        data[1]["enqueued_at"]
    )
    with pytest.raises(TypeError):
        data[0]["args"] = []  # type: ignore[index]
    # The job itself is its first call's: it runs under that call's id, queue and priority.
    (row,) = support.rows(engine, JOBS)
    assert (row.active_job_id, row.queue_name, row.priority) == (first.job_id, "default", 0)


def test_current_job_holds_the_same_calls_and_its_first_call_s_arguments(app, engine):
    later(app, jobs.collect, 8, "first")
    later(app, jobs.collect, 8, "second")

    run_one(app, engine)
    (calls,) = jobs.CALLS
    ((coalesced_calls, arguments),) = jobs.SEEN
    assert coalesced_calls == calls
    assert [call.id for call in coalesced_calls] == call_ids(engine)
    assert arguments == (8, "first")


def test_the_class_form_runs_perform_calls_and_never_perform(app, engine, performed):
    later(app, jobs.CollectCalls, 9, "a")
    later(app, jobs.CollectCalls, 9, "b")

    assert run_one(app, engine).kind is OutcomeKind.FINISHED
    ids = call_ids(engine)
    assert performed == [
        ("coalesce_run_test.collect_class", [(ids[0], (9, "a"), {}), (ids[1], (9, "b"), {})])
    ]


def test_a_collecting_class_without_perform_calls_fails_with_its_calls(app, engine, performed):
    first = later(app, jobs.CollectWithoutPerformCalls, 10, "a")
    later(app, jobs.CollectWithoutPerformCalls, 10, "b")

    assert run_one(app, engine).kind is OutcomeKind.FAILED
    assert performed == []  # its perform doesn't stand in
    error = failure(engine, first.provider_job_id)["exception_class"]
    assert error == class_path(NotImplementedError)
    assert len(call_ids(engine, first.provider_job_id)) == 2


# Deleted records.


def add_products(app: Flask, *names: str) -> list[t.Any]:
    with app.app_context():
        made = [jobs.Product(name=name) for name in names]
        support.db.session.add_all(made)
        support.db.session.commit()
        return [product.id for product in made]


def enqueue_products(app: Flask, product_ids: list[int]) -> list[t.Any]:
    return enqueue_products_with(app, jobs.collect_products, product_ids)


def enqueue_products_with(app: Flask, definition: t.Any, product_ids: list[int]) -> list[t.Any]:
    """One call of ``definition`` for each product, passed as a model instance."""
    with app.app_context():
        return [
            definition.perform_later(support.db.session.get(jobs.Product, product_id))
            for product_id in product_ids
        ]


def delete_products(engine: sa.Engine, *product_ids: int) -> None:
    table = jobs.Product.__table__
    with engine.begin() as connection:
        connection.execute(table.delete().where(table.c.id.in_(product_ids)))


def test_a_call_whose_record_is_gone_is_skipped_and_reported_while_the_others_run(
    app, engine, products, performed
):
    kept_1, gone, kept_2 = add_products(app, "kept", "gone", "kept too")
    first, _, _ = enqueue_products(app, [kept_1, gone, kept_2])
    ids = call_ids(engine, first.provider_job_id)
    delete_products(engine, gone)

    with sent(signals.drop_coalesced_call) as dropped, sent(signals.perform) as ran:
        assert run_one(app, engine).kind is OutcomeKind.FINISHED

    assert performed == [
        ("coalesce_run_test.collect_products", [(ids[0], kept_1), (ids[2], kept_2)])
    ]
    assert [call.id for call in ran[0]["job"].coalesced_calls] == [ids[0], ids[2]]
    (payload,) = dropped
    assert payload["call_id"] == ids[1]
    assert payload["job_id"] == first.provider_job_id
    assert payload["active_job_id"] == first.job_id  # the owning job's
    assert payload["class_name"] == "coalesce_run_test.collect_products"
    assert "MissingRecord" in payload["exception_class"]
    assert call_ids(engine) == ids  # every call row stays with its job


def test_a_first_call_whose_record_is_gone_is_skipped_too(app, engine, products, performed):
    # The job's own arguments are a copy of its first call's: they mustn't fail the run.
    gone, kept = add_products(app, "gone", "kept")
    first, _ = enqueue_products(app, [gone, kept])
    ids = call_ids(engine, first.provider_job_id)
    delete_products(engine, gone)

    with sent(signals.drop_coalesced_call) as dropped:
        assert run_one(app, engine).kind is OutcomeKind.FINISHED

    assert performed == [("coalesce_run_test.collect_products", [(ids[1], kept)])]
    assert [payload["call_id"] for payload in dropped] == [ids[0]]


def test_when_every_call_s_record_is_gone_the_run_is_skipped_and_the_job_finishes(
    app, engine, products, performed
):
    product_ids = add_products(app, "one", "two")
    first, _ = enqueue_products(app, product_ids)
    delete_products(engine, *product_ids)

    with (
        sent(signals.drop_coalesced_call) as dropped,
        sent(signals.perform_start) as started,
        sent(signals.perform) as ran,
        sent(signals.fail) as failed,
    ):
        assert run_one(app, engine).kind is OutcomeKind.FINISHED

    assert performed == []
    assert (started, ran, failed) == ([], [], [])
    assert sorted(payload["call_id"] for payload in dropped) == call_ids(engine)
    assert job_state(engine, first.provider_job_id) == "finished"


def test_a_retry_skips_and_reports_a_record_that_is_still_gone_again(
    app, engine, products, performed
):
    kept, gone = add_products(app, "kept", "gone")
    first, _ = enqueue_products_with(app, jobs.collect_products_retried, [kept, gone])
    ids = call_ids(engine, first.provider_job_id)
    delete_products(engine, gone)

    with sent(signals.drop_coalesced_call) as dropped:
        assert run_one(app, engine).kind is OutcomeKind.RETRIED
        assert run_one(app, engine).kind is OutcomeKind.FINISHED

    assert [payload["call_id"] for payload in dropped] == [ids[1], ids[1]]
    assert performed == [("coalesce_run_test.collect_products_retried", [(ids[0], kept)])] * 2
    assert call_ids(engine) == ids


def test_any_other_deserialization_error_fails_the_job_with_its_calls_and_reports_no_drop(
    app, engine, products, performed
):
    # The record of call 1 is gone, and call 2's stored arguments don't load.
    kept, gone, broken = add_products(app, "kept", "gone", "broken")
    first, _, _ = enqueue_products(app, [kept, gone, broken])
    ids = call_ids(engine, first.provider_job_id)
    delete_products(engine, gone)
    with engine.begin() as connection:
        connection.execute(
            CALLS.update()
            .where(CALLS.c.id == ids[2])
            .values(arguments='{"args": [{"_sq": "bogus"}]}')
        )

    with sent(signals.drop_coalesced_call) as dropped:
        assert run_one(app, engine).kind is OutcomeKind.FAILED

    assert performed == []
    assert dropped == []
    error = failure(engine, first.provider_job_id)["exception_class"]
    assert error == class_path(DeserializationError)
    assert call_ids(engine) == ids


# Retries and failures keep the calls.


def test_a_retry_runs_the_same_calls_again(app, engine, performed):
    first = later(app, jobs.collect_retried, 11, "a")
    later(app, jobs.collect_retried, 11, "b")
    ids = call_ids(engine)

    assert run_one(app, engine).kind is OutcomeKind.RETRIED
    assert job_state(engine, first.provider_job_id) == "ready"
    assert waiting_job_ids(engine) == [first.provider_job_id] * 2  # it counts again

    assert run_one(app, engine).kind is OutcomeKind.FINISHED
    expected = [(ids[0], (11, "a"), {}), (ids[1], (11, "b"), {})]
    assert performed == [
        ("coalesce_run_test.collect_retried", expected),
        ("coalesce_run_test.collect_retried", expected),
    ]


def test_a_call_while_a_retry_is_pending_opens_a_new_job(app, engine, performed):
    first = later(app, jobs.collect_retried, 12, "a")
    assert run_one(app, engine).kind is OutcomeKind.RETRIED

    during = later(app, jobs.collect_retried, 12, "b")
    assert during.coalesce_status is CoalesceStatus.CREATED
    assert during.provider_job_id != first.provider_job_id
    (first_call,) = call_ids(engine, first.provider_job_id)
    (during_call,) = call_ids(engine, during.provider_job_id)

    outcomes = {outcome.claimed.id: outcome for outcome in run(app, engine, limit=10)}
    assert outcomes[first.provider_job_id].kind is OutcomeKind.FINISHED
    assert outcomes[during.provider_job_id].kind is OutcomeKind.RETRIED  # its own first run
    assert performed[1:] == [
        ("coalesce_run_test.collect_retried", [(first_call, (12, "a"), {})]),
        ("coalesce_run_test.collect_retried", [(during_call, (12, "b"), {})]),
    ]


def test_a_replace_retry_runs_the_arguments_it_retries_and_a_new_call_opens_a_new_job(
    app, engine, performed
):
    first = later(app, jobs.replace_retried, 29, "old")
    assert run_one(app, engine).kind is OutcomeKind.RETRIED

    during = later(app, jobs.replace_retried, 29, "new")
    assert during.coalesce_status is CoalesceStatus.CREATED
    assert during.provider_job_id != first.provider_job_id

    outcome = run_one(app, engine)
    assert outcome.claimed.id == first.provider_job_id
    assert outcome.kind is OutcomeKind.FINISHED
    assert performed == [
        ("coalesce_run_test.replace_retried", (29, "old")),
        ("coalesce_run_test.replace_retried", (29, "old")),
    ]


def test_a_failed_collecting_job_keeps_all_its_calls(app, engine):
    first = later(app, jobs.collect_failing, 13, "a")
    later(app, jobs.collect_failing, 13, "b")
    later(app, jobs.collect_failing, 13, "c")

    assert run_one(app, engine).kind is OutcomeKind.FAILED
    assert job_state(engine, first.provider_job_id) == "failed"
    assert len(call_ids(engine, first.provider_job_id)) == 3
    assert support.count(engine, CALLS) == 3


# A job whose definition changed since it was stored.


@pytest.mark.parametrize(
    "target",
    [jobs.plain_target, jobs.discard_target, jobs.replace_target],
    ids=["coalesce-removed", "switched-to-discard", "switched-to-replace"],
)
def test_a_collected_job_whose_definition_no_longer_collects_fails_with_its_calls(
    app, engine, performed, target
):
    first = later(app, jobs.collect, 14, "a")
    later(app, jobs.collect, 14, "b")
    switch_definition(engine, first.provider_job_id, target)

    with sent(signals.retry) as retried, sent(signals.discard) as discarded:
        outcome = run_one(app, engine)

    # Nothing ran, and retry_on / discard_on (every target has one for Exception) don't see it.
    assert outcome.kind is OutcomeKind.FAILED
    assert (performed, retried, discarded) == ([], [], [])
    assert failure(engine, first.provider_job_id)["exception_class"] == class_path(
        CollectedJobMismatch
    )
    assert len(call_ids(engine, first.provider_job_id)) == 2


def test_a_collecting_job_whose_calls_are_all_gone_fails_with_collected_job_mismatch(
    app, engine, performed
):
    first = later(app, jobs.collect, 15, "a")
    with engine.begin() as connection:
        connection.execute(CALLS.delete())

    assert run_one(app, engine).kind is OutcomeKind.FAILED
    assert performed == []  # it doesn't fall back to its own arguments
    assert failure(engine, first.provider_job_id)["exception_class"] == class_path(
        CollectedJobMismatch
    )


@pytest.mark.parametrize(
    ("opened_by", "expected"),
    [(jobs.dedupe, (16, "first")), (jobs.replace, (16, "latest"))],
    ids=["discard", "replace"],
)
def test_a_job_opened_without_collecting_runs_its_own_arguments_as_one_call_once_it_collects(
    app, engine, performed, opened_by, expected
):
    first = later(app, opened_by, 16, "first")
    later(app, opened_by, 16, "latest")
    switch_definition(engine, first.provider_job_id, jobs.collect)

    assert run_one(app, engine).kind is OutcomeKind.FINISHED
    assert performed == [("coalesce_run_test.collect", [(None, expected, {})])]


# A worker that died before the start.


def test_a_job_failed_for_a_dead_worker_before_its_start_frees_its_key_and_keeps_its_calls(
    app, engine, performed
):
    first = later(app, jobs.collect, 17, "a")
    later(app, jobs.collect, 17, "b")
    assert claim(engine)
    assert release.fail_all(engine, [PROCESS_ID], failure_json("Dead", "gone")) == 1

    assert key_rows(engine) == {}
    assert job_state(engine, first.provider_job_id) == "failed"
    assert len(call_ids(engine, first.provider_job_id)) == 2

    after = later(app, jobs.collect, 17, "c")
    assert after.coalesce_status is CoalesceStatus.CREATED
    assert after.provider_job_id != first.provider_job_id
    assert len(call_ids(engine, first.provider_job_id)) == 2
    assert performed == []


def test_a_job_released_before_its_start_still_takes_calls_and_runs_them_all(
    app, engine, performed
):
    first = later(app, jobs.collect, 18, "a")
    assert claim(engine)
    assert release.release_all(engine, [PROCESS_ID]) == 1

    joined = later(app, jobs.collect, 18, "b")
    assert joined.coalesce_status is CoalesceStatus.COLLECTED
    assert joined.provider_job_id == first.provider_job_id

    run_one(app, engine)
    ids = call_ids(engine)
    assert performed == [
        ("coalesce_run_test.collect", [(ids[0], (18, "a"), {}), (ids[1], (18, "b"), {})])
    ]


# Discarding a pending job.


def test_deleting_a_pending_collecting_job_deletes_its_calls_and_frees_its_key(app, engine):
    # max_calls=2: job 1 is sealed with A and B; job 2 is open with C.
    a = later(app, jobs.collect_pairs, 19, "A")
    later(app, jobs.collect_pairs, 19, "B")
    c = later(app, jobs.collect_pairs, 19, "C")
    sealed_calls = call_ids(engine, a.provider_job_id)

    with engine.begin() as connection:
        connection.execute(JOBS.delete().where(JOBS.c.id == c.provider_job_id))

    assert key_rows(engine) == {}
    assert call_ids(engine) == sealed_calls  # the other job of the key keeps its calls
    d = later(app, jobs.collect_pairs, 19, "D")
    assert d.coalesce_status is CoalesceStatus.CREATED
    assert d.provider_job_id != a.provider_job_id
    assert len(call_ids(engine, d.provider_job_id)) == 1
    assert call_ids(engine, a.provider_job_id) == sealed_calls


def test_deleting_a_pending_discard_job_frees_its_key(app, engine):
    first = later(app, jobs.dedupe, 20, "first")
    with engine.begin() as connection:
        connection.execute(JOBS.delete().where(JOBS.c.id == first.provider_job_id))

    assert key_rows(engine) == {}
    after = later(app, jobs.dedupe, 20, "after")
    assert after.coalesce_status is CoalesceStatus.CREATED


# Other adapters, and perform_now.


@pytest.fixture
def adapter_app(request, database_url, engine) -> t.Iterator[Flask]:
    """An app on ``database_url`` with the adapter ``request.param``; ``engine`` (of the
    ``app`` fixture, same database) reads the tables it must not touch."""
    app = support.create_app(database_url, SOLIDQ_ADAPTER=request.param)
    with app.app_context():
        yield app
        app.extensions["solidq"].dispose()
        support.db.engines[None].dispose()


def assert_no_queue_rows(engine: sa.Engine) -> None:
    assert [support.count(engine, table) for table in SOLIDQ_TABLES] == [0, 0, 0, 0]


@pytest.mark.parametrize("adapter_app", ["inline"], indirect=True)
def test_the_inline_adapter_runs_each_call_on_its_own_as_one_call_without_id(
    adapter_app, engine, performed
):
    jobs.dedupe.perform_later(21, "a")
    jobs.dedupe.perform_later(21, "b")
    first = jobs.collect.perform_later(21, "c")
    jobs.collect.perform_later(21, "d")

    assert first.coalesce_status is None
    assert performed == [
        ("coalesce_run_test.dedupe", (21, "a")),
        ("coalesce_run_test.dedupe", (21, "b")),
        ("coalesce_run_test.collect", [(None, (21, "c"), {})]),
        ("coalesce_run_test.collect", [(None, (21, "d"), {})]),
    ]
    assert_no_queue_rows(engine)


@pytest.mark.parametrize("adapter_app", ["test"], indirect=True)
def test_the_test_adapter_records_every_call_and_coalesces_nothing(adapter_app, engine, performed):
    with testing.assert_enqueued_with(job=jobs.collect, args=(22, "b")):
        jobs.collect.perform_later(22, "a")
        jobs.collect.perform_later(22, "b")
        jobs.dedupe.perform_later(22, "c")
        jobs.dedupe.perform_later(22, "d")

    recorded = testing.enqueued_jobs()
    assert [job.arguments for job in recorded] == [(22, "a"), (22, "b"), (22, "c"), (22, "d")]
    assert {(job.coalesce_status, job.provider_job_id) for job in recorded} == {(None, None)}
    assert_no_queue_rows(engine)

    assert testing.perform_enqueued_jobs() == 4
    assert performed == [
        ("coalesce_run_test.collect", [(None, (22, "a"), {})]),
        ("coalesce_run_test.collect", [(None, (22, "b"), {})]),
        ("coalesce_run_test.dedupe", (22, "c")),
        ("coalesce_run_test.dedupe", (22, "d")),
    ]
    assert_no_queue_rows(engine)


def test_perform_now_gives_a_collecting_job_one_call_without_id(app, engine, performed):
    with app.app_context():
        jobs.collect.perform_now(23, "a", note="n")
        jobs.CollectCalls.perform_now(23, "b")

    assert performed == [
        ("coalesce_run_test.collect", [(None, (23, "a"), {"note": "n"})]),
        ("coalesce_run_test.collect_class", [(None, (23, "b"), {})]),
    ]
    assert jobs.CALLS[0][0].job_data["args"] == [23, "a"]
    assert_no_queue_rows(engine)


def test_perform_now_with_an_unstorable_argument_raises_only_when_job_data_is_read(
    app, engine, performed
):
    unstorable = object()
    with app.app_context():
        jobs.collect.perform_now(24, unstorable)

    ((call,),) = jobs.CALLS
    assert call.args == (24, unstorable)
    with pytest.raises(SerializationError):
        _ = call.job_data


# What counts as waiting.


def test_waiting_counts_the_calls_of_scheduled_ready_and_blocked_jobs_only(app, engine):
    ready = later(app, jobs.collect_limited, 25, "a")  # takes the "global" slot
    later(app, jobs.collect_limited, 25, "b")
    blocked = later(app, jobs.collect_limited, 26, "c")
    with app.app_context():
        scheduled = jobs.collect.set(wait=600).perform_later(27, "d")
    failing = later(app, jobs.collect_failing, 28, "e")
    states = [
        job_state(engine, job.provider_job_id) for job in (ready, blocked, scheduled, failing)
    ]
    assert states == ["ready", "blocked", "scheduled", "ready"]
    everyone = sorted(
        [ready.provider_job_id] * 2
        + [blocked.provider_job_id, scheduled.provider_job_id, failing.provider_job_id]
    )
    assert waiting_job_ids(engine) == everyone

    claimed = claim(engine, 10)
    assert sorted(job.id for job in claimed) == [ready.provider_job_id, failing.provider_job_id]
    # Claimed (as a worker claims ahead of its threads) but not started: their keys still
    # point at them, and their calls still wait.
    assert waiting_job_ids(engine) == everyone

    outcomes = perform(app, claimed)
    # Started (the start freed their keys), though not yet finished: their calls don't wait.
    still_waiting = sorted([blocked.provider_job_id, scheduled.provider_job_id])
    assert sorted(key_rows(engine).values()) == still_waiting
    assert waiting_job_ids(engine) == sorted([blocked.provider_job_id, scheduled.provider_job_id])

    finish(engine, outcomes)
    assert job_state(engine, ready.provider_job_id) == "finished"
    assert job_state(engine, failing.provider_job_id) == "failed"
    assert job_state(engine, blocked.provider_job_id) == "ready"  # its slot came free
    # Finished and failed jobs' calls don't wait; they stay in the table.
    assert waiting_job_ids(engine) == sorted([blocked.provider_job_id, scheduled.provider_job_id])
    assert support.count(engine, CALLS) == 5
