"""Execute: perform a claimed job and decide its outcome, in one pass: the controls' start
hooks, the job loaded (:mod:`.job_loading`), its steps watched, ``perform``, and how it ended
(:mod:`.outcomes`).

Runs in a worker thread, inside an app context. Every exception ``perform`` raises becomes an
outcome (a retry, a discard or a failure kept for a human); the outcome is stored afterwards,
in batches, by :mod:`flask_solidq.operations.finalize`, which sends its signal (``retry``,
``discard``, ``fail``) once it committed: an outcome carries what the signal needs.
"""

from __future__ import annotations

import datetime as dt
import typing as t

from flask_solidq import controls
from flask_solidq import errors
from flask_solidq import slots
from flask_solidq.controls.rate_limit import back_off
from flask_solidq.controls.rate_limit import rate_charges
from flask_solidq.definitions import arguments
from flask_solidq.definitions import failure_rules
from flask_solidq.definitions import failures
from flask_solidq.definitions import steps
from flask_solidq.operations.job_loading import load
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.operations.outcomes import Retry
from flask_solidq.operations.outcomes import error_json
from flask_solidq.state import get_state
from flask_solidq.steps import runs as step_runs
from flask_solidq.steps import saves as step_saves
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.definitions.job import Job
    from flask_solidq.operations.claim import ClaimedJob
    from flask_solidq.values import ControlKeys


_dumps = arguments.dumps

#: Runs every claimed job's :func:`perform` (a worker's, ``work_off``'s), given the claimed
#: job and the run, which returns its outcome: :mod:`flask_solidq.tracing` fills it to run the
#: job in a span that records the outcome.
AROUND_PERFORM: slots.Hook[t.Callable[[ClaimedJob, t.Callable[[], Outcome]], Outcome]] = slots.Hook(
    "flask_solidq.tracing.spans"
)


def perform(
    claimed: ClaimedJob,
    stopping: t.Callable[[], bool] | None = None,
    process_id: int | None = None,
) -> Outcome:
    """Load and perform ``claimed``; return how it ended. Requires an app context.

    ``stopping`` says whether the worker is stopping: a job with steps then stops at its next
    checkpoint and goes back to its queue (an ``INTERRUPTED`` outcome). ``process_id``, the
    worker holding the claim, lets a job with steps save its progress as it goes.

    The controls' START hooks run first: a coalesced job frees its key and reads its payload
    and calls again (see :mod:`~flask_solidq.controls.coalesce.coalesce_start`). A job whose
    definition can't be loaded, or whose arguments or calls can't be, fails with that reason
    before anything runs.
    """
    started: list[tuple[t.Any, t.Any]] = []
    if controls.acts_at_start(claimed):
        try:
            claimed, started = controls.start(get_state().engine, claimed)
        except controls.HeldAtStart as held:
            return _held_at_start(claimed, held)
    try:
        job = load(claimed)
        runs = controls.prepare_run(job, started) if started else True
    except (errors.JobNotFound, errors.DeserializationError, ValueError) as error:
        return Outcome(claimed, OutcomeKind.FAILED, error=error_json(error), exception=error)
    except errors.CollectedJobMismatch as error:
        # Nothing ran: retry_on and discard_on don't see it; the job fails with its calls.
        return _fail(claimed, job, error)
    if not runs:  # a coalesced job whose calls' records are all gone: nothing failed
        return Outcome(claimed, OutcomeKind.FINISHED, job=job)
    interval = get_state().settings.step_save_interval or 0.0
    step_runs.watch(job, stopping, step_saves.saver(claimed, job, process_id), interval)
    if step_runs.begin_run(job):
        step_saves.count_resumption(claimed, job, process_id)
    try:
        job.perform_now()
        step_runs.end_run(job)
    except steps.JobInterrupted:
        return _interrupted(claimed, job)
    except errors.RateLimited as limited:
        return _rate_limited(claimed, job, limited)
    except errors.StepsChanged as error:
        return _fail(claimed, job, error)
    # The perform wrapper: whatever the job raises becomes its outcome, never the worker's.
    except Exception as error:  # noqa: BLE001
        if step_runs.resumes_on(job, error):
            return _interrupted(claimed, job, error)
        return handle_error(claimed, job, error)
    finally:
        step_runs.unwatch(job)
    return Outcome(claimed, OutcomeKind.FINISHED, job=job)


def perform_in_app(
    app: Flask,
    claimed: ClaimedJob,
    stopping: t.Callable[[], bool] | None = None,
    process_id: int | None = None,
) -> Outcome:
    """:func:`perform` ``claimed`` as a worker's thread does: in a fresh context of ``app`` (the
    job's own session and ``g``, torn down after it), with whatever escapes the run
    (``SystemExit`` or the like from a job) kept as its failure, never lost. The worker and
    :func:`flask_solidq.testing.work_off` both perform through it."""
    try:
        with app.app_context():
            around = AROUND_PERFORM.function
            if around is None:
                return perform(claimed, stopping, process_id)
            return around(claimed, lambda: perform(claimed, stopping, process_id))
    except BaseException as error:  # noqa: BLE001 - a job's SystemExit: keep it as failed
        return escaped(claimed, error)


def escaped(claimed: ClaimedJob, error: BaseException) -> Outcome:
    """The outcome of a run that ``error`` escaped from: failed, with that error."""
    return Outcome(claimed, OutcomeKind.FAILED, error=error_json(error), exception=error)


def handle_error(claimed: ClaimedJob, job: Job, error: Exception) -> Outcome:
    """The outcome of a run that raised ``error``: what the job's ``retry_on`` and
    ``discard_on`` rules say, or a failure."""
    rule = failures.find_rule(type(job), error)
    if isinstance(rule, failure_rules.RetryRule):
        count = job.exception_executions.get(rule.name, 0) + 1
        job.exception_executions[rule.name] = count
        if not rule.is_exhausted(count):
            return _retry(claimed, job, rule, error, count)
        if rule.fallback is None:
            return _fail(claimed, job, error)
        return _discard(claimed, job, error, rule.fallback)
    if isinstance(rule, failure_rules.DiscardRule):
        return _discard(claimed, job, error, rule.callback)
    return _fail(claimed, job, error)


def _discard(
    claimed: ClaimedJob,
    job: Job,
    error: Exception,
    handler: t.Callable[[Job, BaseException], t.Any] | None,
) -> Outcome:
    """Finish a job whose error a rule handles, after its handler (a ``discard_on`` callback
    or a ``retry_on`` fallback) ran; a handler that raises fails the job instead."""
    if handler is not None:
        try:
            handler(job, error)
        except Exception as handler_error:  # noqa: BLE001 - a raising handler fails the job
            return _fail(claimed, job, handler_error)
    return Outcome(claimed, OutcomeKind.DISCARDED, job=job, exception=error)


def _retry(
    claimed: ClaimedJob, job: Job, rule: failure_rules.RetryRule, error: Exception, count: int
) -> Outcome:
    wait = rule.wait_seconds(count)
    retry = Retry(
        arguments=_dumps(job.payload()),
        scheduled_at=utcnow() + dt.timedelta(seconds=wait),
        queue_name=rule.queue or claimed.queue_name,
        priority=claimed.priority if rule.priority is None else rule.priority,
        rate_limit_key=_rate_limit_key(claimed, job),
        wait=wait,
    )
    # The error is kept as one of the job's attempts (operations.attempts).
    error_text = error_json(error, executions=job.executions)
    return Outcome(
        claimed, OutcomeKind.RETRIED, error=error_text, retry=retry, job=job, exception=error
    )


def _interrupted(claimed: ClaimedJob, job: Job, cause: Exception | None = None) -> Outcome:
    """Back to its queue now, same priority, with its progress; no ``retry_on`` attempt
    spent. Past its resumption limit, a failure instead; or, when one of its
    ``resume_errors`` (``cause``) stopped it, what the job's rules say of that error."""
    error = step_runs.past_limit(job, get_state().settings.max_resumptions)
    if error is not None and cause is not None:
        return handle_error(claimed, job, cause)
    if error is not None:
        return _fail(claimed, job, error)
    retry = Retry(
        arguments=_dumps(job.payload()),
        scheduled_at=utcnow(),
        queue_name=claimed.queue_name,
        priority=claimed.priority,
        rate_limit_key=_rate_limit_key(claimed, job),
    )
    return Outcome(claimed, OutcomeKind.INTERRUPTED, retry=retry, job=job, exception=cause)


def _rate_limited(claimed: ClaimedJob, job: Job, limited: errors.RateLimited) -> Outcome:
    """Deferred: back to scheduled once its budgets' back-off is stored, with its progress;
    the run isn't counted (``executions`` as before it), and no rule sees the error. The
    back-off is noted in this process and written at once, before the outcome is handed on
    (:func:`flask_solidq.controls.rate_limit.back_off.heard`); the time the job runs again is the
    finisher's to decide (its budgets' next slot after the pause), so ``retry`` holds this
    host's estimate until then."""
    job.executions = max(0, job.executions - 1)
    pause = limited.pause(utcnow())
    if limited.keys:
        # Our own limiter refused (an ``acquire`` in the run timed out), no API said 429:
        # the job waits that long, and pauses nothing.
        return Outcome(
            claimed,
            OutcomeKind.DEFERRED,
            retry=_deferral(claimed, _dumps(job.payload()), pause),
            job=job,
            exception=limited,
        )
    # Known in this process at once, and to the others as soon as it commits (not when the
    # finisher stores the outcome): the calls that hurt are the ones just after the 429.
    back_off.heard(get_state().engine, {c.key: pause for c in rate_charges.of(claimed)})
    retry = _deferral(claimed, _dumps(job.payload()), pause)
    return Outcome(
        claimed, OutcomeKind.DEFERRED, retry=retry, job=job, exception=limited, pause=pause
    )


def _deferral(claimed: ClaimedJob, arguments: str, wait: dt.timedelta) -> Retry:
    """The retry of a job deferred for ``wait`` at least (its budgets' next slot, which the
    finisher takes, may come later), with ``arguments`` as its payload."""
    return Retry(
        arguments=arguments,
        scheduled_at=utcnow() + wait,
        queue_name=claimed.queue_name,
        priority=claimed.priority,
        rate_limit_key=claimed.rate_limit_key,
        wait=wait.total_seconds(),
    )


def _held_at_start(claimed: ClaimedJob, held: controls.HeldAtStart) -> Outcome:
    """Deferred before it started: a START hook found a budget it was admitted by paused
    (an API's 429 heard after its claim). Nothing ran: the payload and ``executions`` stay as
    stored, no signal of a run is sent, and the finisher gives its budgets back the charge
    its claim made and schedules it at its slot after the pause. A pause only this process
    knows of yet (``held.pause``) is stored with it."""
    retry = _deferral(claimed, claimed.arguments or "{}", held.wait or dt.timedelta(0))
    return Outcome(claimed, OutcomeKind.DEFERRED, retry=retry, pause=held.pause, held_at_start=True)


def _rate_limit_key(claimed: ClaimedJob, job: Job) -> str | None:
    """A retry keeps the rate-limit key its job was stored with; a job stored without one
    takes the key its definition's controls give it now (none if they raise)."""
    if claimed.rate_limit_key is not None:
        return claimed.rate_limit_key
    row: ControlKeys = {"concurrency_key": None, "rate_limit_key": None, "rate_limit_charges": None}
    try:
        controls.stamp(job, row)
    except Exception:  # noqa: BLE001 - the retry goes on with the bare budget
        return None
    return row["rate_limit_key"]


def _fail(claimed: ClaimedJob, job: Job, error: BaseException) -> Outcome:
    error_text = error_json(error, executions=job.executions)
    return Outcome(
        claimed,
        OutcomeKind.FAILED,
        error=error_text,
        job=job,
        exception=error,
        arguments=_progress_payload(job),
    )


def _progress_payload(job: Job) -> str | None:
    """The payload to store with a failure of a job that has step progress (None if it has
    none, or if it can't be stored: the failure is stored all the same)."""
    if not job._steps.any:
        return None
    try:
        return _dumps(job.payload())
    except errors.SolidQError:
        return None
