"""A steps job's run as the worker drives it: watching whether the worker is stopping,
counting a resumption as a run starts from saved progress, checking the saved steps were all
reached as it ends, and deciding whether an error resumes it or its resumptions are spent."""

from __future__ import annotations

import typing as t

from flask_solidq.definitions.step_options import Default
from flask_solidq.definitions.steps import Resumable
from flask_solidq.definitions.steps import apply_watch
from flask_solidq.definitions.steps import changed_error
from flask_solidq.definitions.steps import never_stopping
from flask_solidq.errors import ResumptionLimitReached


def end_run(job: Resumable) -> None:
    """Check, as a run returns, that it met every step its saved progress names.

    :raises flask_solidq.errors.StepsChanged: a step saved as done or in progress when the
        run began was never reached.
    """
    progress = job.__dict__.get("_progress")
    if progress is None:
        return
    done, current = progress.loaded
    for name, how in [*((name, "done") for name in done), (current, "in progress")]:
        if name is not None and name not in progress.met:
            raise changed_error(name, how, "perform returned without reaching it")


def watch(
    job: Resumable,
    stopping: t.Callable[[], bool] | None,
    saver: t.Callable[[], object] | None = None,
    save_interval: float = 0.0,
) -> None:
    """Let ``job``'s steps ask ``stopping`` whether the worker is stopping, and write their
    progress with ``saver`` when a step finishes and every ``save_interval`` seconds at most
    as they advance. Kept on the job until its progress is made (at its first step)."""
    job.__dict__["_watch"] = (stopping or never_stopping, saver, save_interval)
    progress = job.__dict__.get("_progress")
    if progress is not None:
        apply_watch(job, progress)


def unwatch(job: Resumable) -> None:
    """End what :func:`watch` gave ``job``, as its run ends: its saver refers to the job, and
    that circle would keep every job a worker ran alive until the garbage collector's next
    full pass (a worker runs thousands a second)."""
    job.__dict__.pop("_watch", None)
    progress = job.__dict__.get("_progress")
    if progress is not None:
        progress.stopping, progress.saver = never_stopping, None


def begin_run(job: Resumable) -> bool:
    """Count a resumption if the job starts with saved progress (Rails counts the same);
    return whether it does."""
    progress = job.__dict__.get("_progress")
    if progress is None or not progress.saved:
        return False
    progress.resumptions += 1
    return True


def resumes_on(job: Resumable, error: BaseException) -> bool:
    """Whether ``error`` resumes ``job`` from its saved step: it is one of the job's
    ``resume_errors``, raised after this run saved something new (so a resumed run that
    fails at once is not resumed again and again)."""
    progress = job.__dict__.get("_progress")
    return progress is not None and progress.advanced and isinstance(error, type(job).resume_errors)


def limit_of(job: Resumable, default: int | None) -> int | None:
    """The resumption limit of ``job``: its definition's, else ``default``."""
    declared = type(job).max_resumptions
    return default if declared is Default.CONFIG else declared


def past_limit(job: Resumable, default: int | None) -> ResumptionLimitReached | None:
    """The error to fail an interrupted ``job`` with, if resuming it once more would pass its
    limit (``default``: ``SOLIDQ_MAX_RESUMPTIONS``); None while it may resume."""
    limit = limit_of(job, default)
    resumptions = job._steps.resumptions
    if limit is None or resumptions < limit:
        return None
    declared = type(job).max_resumptions is not Default.CONFIG
    option = "max_resumptions" if declared else "SOLIDQ_MAX_RESUMPTIONS"
    plural = "" if resumptions == 1 else "s"
    return ResumptionLimitReached(
        f"{type(job).__qualname__} was interrupted after {resumptions} resumption{plural}"
        f" ({option}={limit}): raise the limit, or stop its workers less often. Its progress"
        " is kept: retry the failed job to resume it."
    )
