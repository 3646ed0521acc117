"""Jobs for the tests of steps that resume: in-process ones (:mod:`tests.steps.test_steps`)
note each unit of work in :data:`DONE`; the ones real workers run
(:mod:`tests.processes.test_steps_processes`) leave run rows in ``solidq_test_runs``.

Every name starts with ``steps_test.`` (job names are process-wide).
"""

from __future__ import annotations

import time
import typing as t

from flask_solidq import Job
from flask_solidq import coalesce
from flask_solidq import current_job
from flask_solidq import retry_on
from flask_solidq.definitions.steps import Step
from tests.jobs.worker import record_run
from tests.support import solidq

#: (step, item) of each unit of work done in this process, in order.
DONE: list[tuple[str, t.Any]] = []


class Flaky(Exception):
    """Raised once by :func:`flaky_walk`, which retries on it."""


class Walk(Job, name="steps_test.walk"):
    """Three steps: ``prepare``, ``walk`` over ``range(total)`` advancing after each item, and
    ``wrap_up``."""

    def perform(self, total: int) -> None:
        self.step("prepare", self.prepare)
        self.step("walk", self.walk, total)
        self.step("wrap_up", self.wrap_up)

    def prepare(self, step: Step) -> None:
        DONE.append(("prepare", None))

    def walk(self, step: Step, total: int) -> None:
        for n in range(step.cursor or 0, total):
            DONE.append(("walk", n))
            step.advance(n + 1)

    def wrap_up(self, step: Step) -> None:
        DONE.append(("wrap_up", None))


class LimitedWalk(Walk, name="steps_test.limited_walk", max_resumptions=1):
    """:class:`Walk`, resumable once."""


@solidq.job(name="steps_test.flaky_walk")
@retry_on(Flaky, attempts=3, wait=0)
def flaky_walk(total: int, fail_at: int) -> None:
    """A function job's one step, raising :class:`Flaky` at ``fail_at`` in its first run."""
    current_job.step("walk", _walk_failing, total, fail_at, Flaky)


@solidq.job(name="steps_test.failing_walk")
def failing_walk(total: int, fail_at: int) -> None:
    """As :func:`flaky_walk`, with a ValueError no rule handles: the job fails."""
    current_job.step("walk", _walk_failing, total, fail_at, ValueError)


def _walk_failing(step: Step, total: int, fail_at: int, error: type[Exception]) -> None:
    for n in range(step.cursor or 0, total):
        if n == fail_at and current_job.executions == 1:
            raise error(f"failing at {n}")
        DONE.append(("walk", n))
        step.advance(n + 1)


#: The items before which :class:`ResumingWalk` raises TimeoutError (not where a run starts).
TIMEOUT_AT: set[int] = set()


class ResumingWalk(Walk, name="steps_test.resuming_walk", max_resumptions=2):
    """:class:`Walk`, whose ``walk`` raises TimeoutError before the items in
    :data:`TIMEOUT_AT` (but the one it starts at), which resumes it, twice at most."""

    resume_errors = (TimeoutError,)

    def walk(self, step: Step, total: int) -> None:
        start = step.cursor or 0
        for n in range(start, total):
            if n in TIMEOUT_AT and n != start:
                raise TimeoutError(f"timed out at {n}")
            DONE.append(("walk", n))
            step.advance(n + 1)


@retry_on(TimeoutError, attempts=2, wait=0)
class RetriedResumingWalk(ResumingWalk, name="steps_test.retried_resuming_walk"):
    """:class:`ResumingWalk`, with a ``retry_on`` rule for TimeoutError."""


@solidq.job(name="steps_test.resuming_function", resume_errors=(TimeoutError,))
def resuming_function(total: int, fail_at: int) -> None:
    """A function job resuming on TimeoutError, raised at ``fail_at`` in its first run."""
    current_job.step("walk", _walk_failing, total, fail_at, TimeoutError)


@solidq.job(name="steps_test.twice")
def twice() -> None:
    """Two steps of one name."""
    current_job.step("a", lambda step: None)
    current_job.step("a", lambda step: None)


@solidq.job(name="steps_test.bad_cursor")
def bad_cursor() -> None:
    """A cursor that can't be stored."""
    current_job.step("a", lambda step: step.advance(object()))


@solidq.job(name="steps_test.collect_walk")
@coalesce(key="all", on_conflict="collect")
def collect_walk(calls: list[t.Any]) -> None:
    """A collecting job walking its calls, one step."""
    current_job.step("calls", _walk_calls, calls)


def _walk_calls(step: Step, calls: list[t.Any]) -> None:
    for index in range(step.cursor or 0, len(calls)):
        DONE.append(("calls", calls[index].args))
        step.advance(index + 1)


# Run by real workers.


@solidq.job(name="steps_test.count_up")
def count_up(total: int, delay: float) -> None:
    """``prepare`` (one run row), then ``count``: a run row for each n in ``range(total)``
    and ``delay`` seconds of sleep, advancing after each."""
    current_job.step("prepare", lambda step: record_run("steps_test.prepare", None))
    current_job.step("count", _count, total, delay)


def _count(step: Step, total: int, delay: float) -> None:
    for n in range(step.cursor or 0, total):
        record_run("steps_test.count", n)
        time.sleep(delay)
        step.advance(n + 1)


@solidq.job(name="steps_test.count_labelled")
def count_labelled(label: str, total: int, delay: float) -> None:
    """``count``: a ``steps_test.unit`` run row ``<label>:<n>`` for each n in ``range(total)``,
    then ``delay`` seconds of sleep, advancing after each; then ``close``: one
    ``steps_test.closed`` row."""
    current_job.step("count", _count_labelled, label, total, delay)
    current_job.step("close", lambda step: record_run("steps_test.closed", label))


def _count_labelled(step: Step, label: str, total: int, delay: float) -> None:
    for n in range(step.cursor or 0, total):
        record_run("steps_test.unit", f"{label}:{n}")
        time.sleep(delay)
        step.advance(n + 1)


@solidq.job(name="steps_test.batch_end")
def batch_end(batch: t.Any) -> None:
    """A batch's ``on_finish``: a ``steps_test.batch_end`` row ``<id>:<completed>:<failed>``."""
    record_run("steps_test.batch_end", f"{batch.id}:{batch.completed_jobs}:{batch.failed_jobs}")


@solidq.job(name="steps_test.checkpointed")
def checkpointed(total: int) -> None:
    """``poll``: notes the cursor it starts from, then checks ``total`` times whether the
    worker is stopping (``step.checkpoint()``, saving nothing), noting each check."""
    current_job.step("poll", _poll, total)


def _poll(step: Step, total: int) -> None:
    DONE.append(("cursor", step.cursor))
    for index in range(total):
        DONE.append(("poll", index))
        step.checkpoint()
