"""Steps that resume (issue 21, items 8-9), on every backend: a job interrupted at a checkpoint
goes back to ready with its progress and spends no attempt; the next run skips the finished
steps and starts the current one from its cursor; retry_on and a retry by hand resume from the
saved progress; the resumption limit; step names and cursors; ``perform_now``.

Jobs are claimed, performed and finished in-process (the helpers of
:mod:`tests.controls.concurrency.test_concurrency_controls`); ``stopping`` stands for the worker's
flag.
"""

from __future__ import annotations

import json
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import ResumptionLimitReached
from flask_solidq import SerializationError
from flask_solidq import StepsChanged
from flask_solidq import signals
from flask_solidq.config import OnWorkerDeath
from flask_solidq.config import load_settings
from flask_solidq.definitions import step_options
from flask_solidq.operations import execute
from flask_solidq.operations import release
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.operations.outcomes import failure_json
from tests import support
from tests.controls.concurrency.test_concurrency_controls import PROCESS_ID
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import finish
from tests.jobs import steps as jobs
from tests.support import solidq
from tests.support.concurrency import CLAIMED
from tests.support.concurrency import FAILED
from tests.support.concurrency import JOBS
from tests.support.concurrency import ready_ids

if t.TYPE_CHECKING:
    from flask import Flask


@pytest.fixture(autouse=True)
def done() -> t.Iterator[list[tuple[str, t.Any]]]:
    jobs.DONE.clear()
    yield jobs.DONE
    jobs.DONE.clear()


def later(app: Flask, definition: t.Any, *args: t.Any) -> int:
    with app.app_context():
        return t.cast(int, definition.perform_later(*args).provider_job_id)


def run(
    app: Flask,
    engine: sa.Engine,
    stopping: t.Callable[[], bool] | None = None,
    process_id: int | None = None,
) -> Outcome:
    """Claim the one ready job, perform it (``stopping`` as its worker's flag; as a worker's
    with ``process_id``), store it."""
    (claimed,) = claim(engine)
    with app.app_context():
        outcome = execute.perform(claimed, stopping=stopping, process_id=process_id)
    assert finish(engine, [outcome]) == [outcome]
    return outcome


def after_items(count: int) -> t.Callable[[], bool]:
    """A worker that starts stopping once ``count`` units of work were done."""
    return lambda: len(jobs.DONE) >= count


def payload(engine: sa.Engine, job_id: int) -> dict[str, t.Any]:
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    return t.cast(dict[str, t.Any], json.loads(row.arguments))


def test_an_interrupted_job_goes_back_to_ready_with_its_progress_and_spends_no_attempt(
    app, engine, done
):
    job_id = later(app, jobs.Walk, 6)
    retries: list[t.Any] = []

    with signals.retry.connected_to(lambda sender, **kw: retries.append(kw)):
        outcome = run(app, engine, stopping=after_items(4))  # prepare, then items 0, 1, 2

    assert outcome.kind is OutcomeKind.INTERRUPTED
    assert outcome.exception is None
    assert done == [("prepare", None), ("walk", 0), ("walk", 1), ("walk", 2)]
    assert ready_ids(engine) == [job_id]
    assert support.count(engine, CLAIMED) == support.count(engine, FAILED) == 0
    stored = payload(engine, job_id)
    assert stored["steps"] == {"done": ["prepare"], "current": ["walk", 3]}
    assert stored["resumptions"] == 0
    assert stored["executions"] == 1
    assert "exception_executions" not in stored
    assert retries == []


def test_the_next_run_skips_the_finished_steps_and_resumes_the_current_one_from_its_cursor(
    app, engine, done
):
    job_id = later(app, jobs.Walk, 6)
    run(app, engine, stopping=after_items(4))
    done.clear()

    outcome = run(app, engine)

    assert outcome.kind is OutcomeKind.FINISHED
    assert done == [("walk", 3), ("walk", 4), ("walk", 5), ("wrap_up", None)]
    assert t.cast(t.Any, outcome.job).step_progress == {
        "done": ["prepare", "walk", "wrap_up"],
        "current": None,
        "resumptions": 1,
    }
    assert t.cast(t.Any, outcome.job).executions == 2
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    assert row.finished_at is not None


def test_every_step_but_the_first_of_a_run_checkpoints_before_it_starts(app, engine, done):
    job_id = later(app, jobs.Walk, 2)

    outcome = run(app, engine, stopping=lambda: True)

    # The first step ran whole; the worker was stopping before the second began.
    assert outcome.kind is OutcomeKind.INTERRUPTED
    assert done == [("prepare", None)]
    assert payload(engine, job_id)["steps"] == {"done": ["prepare"]}


def test_a_retry_on_retry_resumes_from_the_progress_saved_when_it_failed(app, engine, done):
    job_id = later(app, jobs.flaky_walk, 5, 3)

    first = run(app, engine)

    assert first.kind is OutcomeKind.RETRIED
    assert payload(engine, job_id)["steps"] == {"done": [], "current": ["walk", 3]}
    assert payload(engine, job_id)["exception_executions"] == {"[Flaky]": 1}
    done.clear()
    assert run(app, engine).kind is OutcomeKind.FINISHED
    assert done == [("walk", 3), ("walk", 4)]


def test_a_failed_job_keeps_its_progress_and_a_retry_by_hand_resumes_from_it(app, engine, done):
    job_id = later(app, jobs.failing_walk, 5, 2)

    assert run(app, engine).kind is OutcomeKind.FAILED

    assert support.count(engine, FAILED) == 1
    assert payload(engine, job_id)["steps"] == {"done": [], "current": ["walk", 2]}
    done.clear()
    with app.app_context():
        assert solidq.retry(job_id) == 1
    outcome = run(app, engine)
    assert outcome.kind is OutcomeKind.FINISHED
    assert done == [("walk", 2), ("walk", 3), ("walk", 4)]
    assert t.cast(t.Any, outcome.job).step_progress["resumptions"] == 1


def test_past_max_resumptions_an_interrupted_job_fails_with_resumption_limit_reached(
    app, engine, done
):
    job_id = later(app, jobs.LimitedWalk, 10)
    assert run(app, engine, stopping=after_items(2)).kind is OutcomeKind.INTERRUPTED

    outcome = run(app, engine, stopping=after_items(4))  # resumed once: the limit

    assert outcome.kind is OutcomeKind.FAILED
    assert isinstance(outcome.exception, ResumptionLimitReached)
    assert str(outcome.exception) == (
        "LimitedWalk was interrupted after 1 resumption (max_resumptions=1): raise the limit,"
        " or stop its workers less often. Its progress is kept: retry the failed job to resume"
        " it."
    )
    (failure,) = support.rows(engine, FAILED)
    error = json.loads(failure.error)
    assert error["exception_class"] == "flask_solidq.errors.ResumptionLimitReached"
    assert payload(engine, job_id)["steps"] == {"done": ["prepare"], "current": ["walk", 3]}
    assert payload(engine, job_id)["resumptions"] == 1
    # Retried by hand, it resumes (a retry is a person's decision, past the limit).
    done.clear()
    with app.app_context():
        assert solidq.retry(job_id) == 1
    assert run(app, engine).kind is OutcomeKind.FINISHED
    assert done[0] == ("walk", 3)


def test_solidq_max_resumptions_is_the_default_limit(database_url):
    with support.app_emptied_after(database_url, SOLIDQ_MAX_RESUMPTIONS=0) as app:
        with app.app_context():
            engine = app.extensions["solidq"].engine
        later(app, jobs.Walk, 10)

        outcome = run(app, engine, stopping=after_items(2))

        assert outcome.kind is OutcomeKind.FAILED
        assert str(outcome.exception).startswith(
            "Walk was interrupted after 0 resumptions (SOLIDQ_MAX_RESUMPTIONS=0): "
        )


def test_a_collecting_job_interrupted_keeps_its_calls_and_runs_each_once(app, engine, done):
    with app.app_context():
        first = jobs.collect_walk.perform_later("a")
        jobs.collect_walk.perform_later("b")
        jobs.collect_walk.perform_later("c")
    job_id = first.provider_job_id

    assert run(app, engine, stopping=after_items(1)).kind is OutcomeKind.INTERRUPTED
    assert ready_ids(engine) == [job_id]
    assert run(app, engine).kind is OutcomeKind.FINISHED

    assert done == [("calls", ("a",)), ("calls", ("b",)), ("calls", ("c",))]


# Saves between interruptions (SOLIDQ_STEP_SAVE_INTERVAL).


def watching(engine: sa.Engine, job_id: int, seen: list[t.Any]) -> t.Callable[[], bool]:
    """A worker that never stops, noting the stored progress each time the job asks it (at
    each advance and before each step but the first, after any save)."""

    def stopping() -> bool:
        seen.append(payload(engine, job_id).get("steps"))
        return False

    return stopping


def test_with_a_zero_save_interval_each_advance_writes_the_progress(database_url):
    with support.app_emptied_after(database_url, SOLIDQ_STEP_SAVE_INTERVAL=0) as app:
        with app.app_context():
            engine = app.extensions["solidq"].engine
        job_id = later(app, jobs.Walk, 2)
        seen: list[t.Any] = []

        run(app, engine, stopping=watching(engine, job_id, seen), process_id=PROCESS_ID)

        assert seen == [
            {"done": ["prepare"]},  # saved as "prepare" finished; checkpoint before "walk"
            {"done": ["prepare"], "current": ["walk", 1]},
            {"done": ["prepare"], "current": ["walk", 2]},
            {"done": ["prepare", "walk"]},  # checkpoint before "wrap_up"
        ]
        jobs.DONE.clear()


def test_by_default_progress_is_written_as_each_step_finishes_not_at_each_advance(app, engine):
    job_id = later(app, jobs.Walk, 2)
    seen: list[t.Any] = []

    run(app, engine, stopping=watching(engine, job_id, seen), process_id=PROCESS_ID)

    # 5 s (the default) never passed between two advances: only the finished steps wrote.
    assert seen == [{"done": ["prepare"]}] * 3 + [{"done": ["prepare", "walk"]}]


def test_a_run_that_no_longer_holds_the_claim_never_writes_the_progress(database_url):
    with support.app_emptied_after(database_url, SOLIDQ_STEP_SAVE_INTERVAL=0) as app:
        with app.app_context():
            engine = app.extensions["solidq"].engine
        job_id = later(app, jobs.Walk, 2)
        seen: list[t.Any] = []

        # As if its claim had been released and taken by another process.
        run(app, engine, stopping=watching(engine, job_id, seen), process_id=PROCESS_ID + 1)

        assert seen == [None] * 4
        jobs.DONE.clear()


def test_without_a_worker_or_with_saves_off_nothing_is_written_as_the_job_goes(database_url):
    with support.app_emptied_after(database_url, SOLIDQ_STEP_SAVE_INTERVAL=None) as app:
        with app.app_context():
            engine = app.extensions["solidq"].engine
        first = later(app, jobs.Walk, 2)
        seen: list[t.Any] = []
        run(app, engine, stopping=watching(engine, first, seen), process_id=PROCESS_ID)
        assert seen == [None] * 4
        jobs.DONE.clear()


# Without a database: step names, cursors, declarations, perform_now.


def test_perform_now_runs_every_step_and_never_interrupts():
    jobs.DONE.clear()
    job = jobs.Walk.new(2)

    job.perform_now()

    assert jobs.DONE == [("prepare", None), ("walk", 0), ("walk", 1), ("wrap_up", None)]
    assert job.step_progress == {
        "done": ["prepare", "walk", "wrap_up"],
        "current": None,
        "resumptions": 0,
    }


def test_a_step_name_met_twice_in_one_run_raises_value_error():
    with pytest.raises(ValueError, match="Step 'a' was already met in this run"):
        jobs.twice.perform_now()


@pytest.mark.parametrize("name", ["", None, 3])
def test_a_step_name_must_be_a_non_empty_string(name):
    job = jobs.Walk.new(1)
    with pytest.raises(ValueError, match="A step's name must be a non-empty string"):
        job.step(name, lambda step: None)


def test_a_cursor_that_cant_be_stored_raises_serialization_error_at_advance():
    with pytest.raises(SerializationError, match="Can't store the cursor of step 'a'"):
        jobs.bad_cursor.perform_now()


@pytest.mark.parametrize("value", [-1, 1.5, "3", True])
def test_max_resumptions_must_be_an_int_of_0_or_more_or_none(value):
    with pytest.raises(ValueError, match="max_resumptions= must be an int of 0 or more"):

        class Bad(jobs.Walk, name=f"steps_test.bad_{value!r}", max_resumptions=value):
            pass

    with pytest.raises(ValueError, match="max_resumptions= must be an int of 0 or more"):
        solidq.job(name=f"steps_test.bad_function_{value!r}", max_resumptions=value)(lambda: None)


def test_max_resumptions_is_inherited_and_none_means_no_limit():
    class Unlimited(jobs.LimitedWalk, name="steps_test.unlimited", max_resumptions=None):
        pass

    assert jobs.Walk.max_resumptions is step_options.Default.CONFIG
    assert jobs.LimitedWalk.max_resumptions == 1
    assert Unlimited.max_resumptions is None


@pytest.mark.parametrize(
    ("value", "error"), [(-1, ValueError), ("100", TypeError), (True, TypeError)]
)
def test_solidq_max_resumptions_is_validated(value, error):
    with pytest.raises(error, match="SOLIDQ_MAX_RESUMPTIONS"):
        load_settings({"SOLIDQ_MAX_RESUMPTIONS": value})


def test_solidq_max_resumptions_defaults_to_100_and_takes_none():
    assert load_settings({}).max_resumptions == 100
    assert load_settings({"SOLIDQ_MAX_RESUMPTIONS": None}).max_resumptions is None


@pytest.mark.parametrize(("value", "error"), [(-1, ValueError), ("5", TypeError)])
def test_solidq_step_save_interval_is_validated(value, error):
    with pytest.raises(error, match="SOLIDQ_STEP_SAVE_INTERVAL"):
        load_settings({"SOLIDQ_STEP_SAVE_INTERVAL": value})


def test_solidq_step_save_interval_defaults_to_5_s_and_takes_0_and_none():
    assert load_settings({}).step_save_interval == 5.0
    assert load_settings({"SOLIDQ_STEP_SAVE_INTERVAL": 0}).step_save_interval == 0.0
    assert load_settings({"SOLIDQ_STEP_SAVE_INTERVAL": None}).step_save_interval is None


def test_malformed_step_progress_in_a_payload_raises_deserialization_error():
    from flask_solidq import DeserializationError

    job = jobs.Walk.new(1)
    with pytest.raises(DeserializationError, match="step progress is malformed"):
        job.load_payload({"args": [1], "steps": {"done": "prepare"}})


def test_an_interrupted_job_stays_pending_in_its_batch_until_it_finishes(app, engine, done):
    with app.app_context():
        with solidq.batch() as batch:
            jobs.Walk.perform_later(6)

    def counts() -> tuple[str, int, int]:
        with app.app_context():
            found = solidq.batches.find(batch.id)
        return found.status.value, found.pending_jobs, found.completed_jobs

    assert run(app, engine, stopping=after_items(4)).kind is OutcomeKind.INTERRUPTED
    assert counts() == ("pending", 1, 0)
    assert run(app, engine).kind is OutcomeKind.FINISHED
    assert counts() == ("completed", 0, 1)


# A worker that died (issue 34): its steps jobs resume, whatever SOLIDQ_ON_WORKER_DEATH says.

DEATH = failure_json(
    "flask_solidq.ProcessExitError",
    "Worker w1 (pid 1 on h) was killed while the job was claimed; it may not have started",
)


def store_progress(engine: sa.Engine, job_id: int, **keys: t.Any) -> None:
    """Store ``keys`` (``steps``, ``resumptions``) in the job's payload, as a run saved them."""
    stored = {**payload(engine, job_id), **keys}
    with engine.begin() as connection:
        connection.execute(
            JOBS.update().where(JOBS.c.id == job_id).values(arguments=json.dumps(stored))
        )


def die(app: Flask, engine: sa.Engine, policy: str) -> int:
    """Claim the one ready job as :data:`PROCESS_ID`, which then dies: its claims are handled
    as a supervisor does; return how many."""
    claim(engine)
    with app.app_context():
        return release.handle_lost_claims(
            engine, [PROCESS_ID], policy=OnWorkerDeath(policy), error=DEATH
        )


@pytest.mark.parametrize("policy", ["fail", "release"])
def test_a_steps_job_whose_worker_died_resumes_from_its_saved_cursor(app, engine, done, policy):
    job_id = later(app, jobs.Walk, 6)
    run(app, engine, stopping=after_items(3))
    store_progress(engine, job_id, resumptions=1)  # the dead run's, written as it started
    done.clear()

    assert die(app, engine, policy) == 1

    assert ready_ids(engine) == [job_id]
    assert support.count(engine, FAILED) == support.count(engine, CLAIMED) == 0
    outcome = run(app, engine)
    assert outcome.kind is OutcomeKind.FINISHED
    assert done == [("walk", 2), ("walk", 3), ("walk", 4), ("walk", 5), ("wrap_up", None)]
    assert t.cast(t.Any, outcome.job).step_progress["resumptions"] == 2


@pytest.mark.parametrize("policy", ["fail", "release"])
def test_a_steps_job_past_max_resumptions_fails_saying_where_its_dead_worker_stopped(
    app, engine, done, policy
):
    job_id = later(app, jobs.LimitedWalk, 6)
    run(app, engine, stopping=after_items(3))
    store_progress(engine, job_id, resumptions=1)

    assert die(app, engine, policy) == 1

    assert ready_ids(engine) == []
    (failure,) = support.rows(engine, FAILED)
    error = json.loads(failure.error)
    assert error["exception_class"] == "flask_solidq.ResumptionLimitReached"
    assert error["message"] == (
        "Worker w1 (pid 1 on h) was killed while the job was claimed. It stopped at step 'walk'"
        " (cursor 2) after 1 resumption (max_resumptions=1), so it failed instead of resuming."
        " Its progress is kept: retry the failed job to resume it."
    )
    assert payload(engine, job_id)["steps"] == {"done": ["prepare"], "current": ["walk", 2]}


def test_a_job_without_step_progress_follows_on_worker_death_as_before(app, engine, done):
    job_id = later(app, jobs.Walk, 6)

    assert die(app, engine, "fail") == 1

    (failure,) = support.rows(engine, FAILED)
    assert failure.job_id == job_id
    assert "it may not have started" in json.loads(failure.error)["message"]


def test_a_resumed_job_and_a_failed_one_change_their_batch_as_any_job(app, engine, done):
    with app.app_context():
        with solidq.batch() as batch:
            resumed = jobs.Walk.perform_later(6).provider_job_id
    run(app, engine, stopping=after_items(3))

    def counts() -> tuple[str, int, int, int]:
        with app.app_context():
            found = solidq.batches.find(batch.id)
        return found.status.value, found.pending_jobs, found.completed_jobs, found.failed_jobs

    assert die(app, engine, "fail") == 1
    assert ready_ids(engine) == [resumed]
    assert counts() == ("pending", 1, 0, 0)
    store_progress(engine, resumed, resumptions=100)
    assert die(app, engine, "release") == 1
    assert counts()[1:] == (0, 0, 1)


def test_a_worker_writes_the_resumption_a_run_counts_before_the_job_runs(app, engine, done):
    job_id = later(app, jobs.Walk, 6)
    run(app, engine, stopping=after_items(3))
    seen: list[t.Any] = []

    def stopping() -> bool:
        seen.append(payload(engine, job_id)["resumptions"])
        return False

    run(app, engine, stopping=stopping, process_id=PROCESS_ID)

    assert seen[0] == 1  # at the first advance, before any step finished or saved


# resume_errors


def test_a_resume_error_after_an_advance_resumes_the_job_from_its_saved_step(app, engine, done):
    jobs.TIMEOUT_AT.clear()
    jobs.TIMEOUT_AT.add(3)
    job_id = later(app, jobs.ResumingWalk, 5)

    outcome = run(app, engine)

    assert outcome.kind is OutcomeKind.INTERRUPTED
    assert isinstance(outcome.exception, TimeoutError)
    assert ready_ids(engine) == [job_id]
    assert support.count(engine, FAILED) == 0
    stored = payload(engine, job_id)
    assert stored["steps"] == {"done": ["prepare"], "current": ["walk", 3]}
    assert "exception_executions" not in stored
    done.clear()
    finished = run(app, engine)
    assert finished.kind is OutcomeKind.FINISHED
    assert done == [("walk", 3), ("walk", 4), ("wrap_up", None)]
    assert t.cast(t.Any, finished.job).step_progress["resumptions"] == 1


@pytest.mark.parametrize(
    ("definition", "spent"),
    [(jobs.ResumingWalk, OutcomeKind.FAILED), (jobs.RetriedResumingWalk, OutcomeKind.RETRIED)],
)
def test_past_max_resumptions_a_resume_error_is_handled_as_any_error(
    app, engine, done, definition, spent
):
    jobs.TIMEOUT_AT.clear()
    jobs.TIMEOUT_AT.update({2, 4, 6})
    later(app, definition, 10)

    kinds = [run(app, engine).kind for _ in range(3)]

    assert kinds == [OutcomeKind.INTERRUPTED, OutcomeKind.INTERRUPTED, spent]
    if spent is OutcomeKind.FAILED:
        (failure,) = support.rows(engine, FAILED)
        assert json.loads(failure.error)["exception_class"] == "builtins.TimeoutError"


def test_a_resume_error_before_the_run_advanced_is_handled_as_any_error(app, engine, done):
    later(app, jobs.resuming_function, 5, 0)

    outcome = run(app, engine)

    assert outcome.kind is OutcomeKind.FAILED
    assert isinstance(outcome.exception, TimeoutError)


def test_a_function_job_declares_resume_errors_with_its_decorator(app, engine, done):
    job_id = later(app, jobs.resuming_function, 5, 2)

    assert run(app, engine).kind is OutcomeKind.INTERRUPTED
    assert payload(engine, job_id)["steps"] == {"done": [], "current": ["walk", 2]}
    assert run(app, engine).kind is OutcomeKind.FINISHED


@pytest.mark.parametrize("value", [TimeoutError, [TimeoutError], (TimeoutError, "x"), (int,)])
def test_resume_errors_must_be_a_tuple_of_exception_classes(value):
    with pytest.raises(TypeError, match=r"Bad\.resume_errors must be a tuple of exception"):
        type("Bad", (jobs.Walk,), {"resume_errors": value}, name="steps_test.bad_resume")
    with pytest.raises(TypeError, match=r"@solidq\.job\(resume_errors=\) must be a tuple"):
        solidq.job(name="steps_test.bad_resume_function", resume_errors=value)(lambda: None)


# A job whose steps changed since its progress was saved.


@pytest.mark.parametrize(
    ("saved", "message"),
    [
        ({"done": ["walk"]}, "Step 'walk' was saved as done but perform reached 'prepare' first"),
        (
            {"done": ["prepare", "embed"]},
            "Step 'embed' was saved as done but perform reached 'walk' first",
        ),
        (
            {"done": ["prepare"], "current": ["embed", 3]},
            "Step 'embed' was saved as in progress but perform reached 'walk' first",
        ),
        (
            {"done": ["prepare", "walk", "wrap_up", "publish"]},
            "Step 'publish' was saved as done but perform returned without reaching it",
        ),
    ],
)
def test_a_job_whose_steps_changed_since_its_progress_was_saved_fails_naming_the_step(
    app, engine, done, saved, message
):
    job_id = later(app, jobs.RetriedResumingWalk, 3)
    store_progress(engine, job_id, steps=saved)

    outcome = run(app, engine)

    assert outcome.kind is OutcomeKind.FAILED  # not retried: running it again changes nothing
    assert isinstance(outcome.exception, StepsChanged)
    assert str(outcome.exception) == (
        f"{message}: the job's steps changed since its progress was saved. Restore the step,"
        " or discard the job and enqueue it again."
    )
    assert payload(engine, job_id)["steps"] == saved


def test_steps_saved_in_the_order_they_run_resume_as_before(app, engine, done):
    job_id = later(app, jobs.Walk, 3)
    store_progress(engine, job_id, steps={"done": ["prepare", "walk"]})

    assert run(app, engine).kind is OutcomeKind.FINISHED
    assert done == [("wrap_up", None)]


def test_a_checkpoint_interrupts_a_stopping_worker_without_saving_a_cursor(app, engine, done):
    job_id = later(app, jobs.checkpointed, 5)
    outcome = run(app, engine, stopping=after_items(3))  # the cursor, then polls 0 and 1
    assert outcome.kind is OutcomeKind.INTERRUPTED
    assert done == [("cursor", None), ("poll", 0), ("poll", 1)]
    assert payload(engine, job_id)["steps"] == {"done": [], "current": ["poll", None]}
    done.clear()
    assert run(app, engine).kind is OutcomeKind.FINISHED
    assert done[0] == ("cursor", None)  # nothing advanced: the step starts over
    assert len(done) == 6
