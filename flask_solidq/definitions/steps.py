"""Steps that resume: a long job split into named steps, each keeping a cursor, so that a job
interrupted by a stopping worker (or retried after an error) goes on where it stopped instead
of starting over. Ported from Rails' ``ActiveJob::Continuation``::

    class EmbedDocuments(solidq.Job):
        def perform(self, account_id):
            self.step("prepare", self.prepare, account_id)
            self.step("embed", self.embed, account_id)

        def embed(self, step, account_id):
            for chunk in documents_after(step.cursor, account_id):
                index(chunk)
                step.advance(chunk[-1].id)

Progress lives in the job's payload (``solidq_jobs.arguments``), next to the retry counters:
``"steps": {"done": [...], "current": [name, cursor]}`` and ``"resumptions": n``. It is
written whenever the payload is (when the job is interrupted, retried or fails), and, in a
worker, as the job goes (see :mod:`flask_solidq.steps.saves`): when a step finishes,
and at an ``advance`` once ``SOLIDQ_STEP_SAVE_INTERVAL`` passed since the last write. So it
needs no table, and a retry (by a ``retry_on`` rule or by hand) carries it as it carries the
rest.

How a stopping worker reaches the job: the worker hands ``execute.perform`` a callable that
says whether it is stopping, and :func:`watch` gives it to the job's :class:`Progress`
(definitions can't import processes). ``advance`` and ``checkpoint`` ask it, and raise
:class:`JobInterrupted` when it says yes. Under ``perform_now`` nothing watches: the job is
never interrupted, and its progress lives in memory only.

A run that resumes checks its steps against the saved ones (:func:`run_step`, and
:mod:`~flask_solidq.steps.runs` as it ends): steps run in the order they were saved
in, else :class:`~flask_solidq.errors.StepsChanged`.
"""

from __future__ import annotations

import time
import typing as t

from flask_solidq.definitions import arguments
from flask_solidq.definitions.declared import DeclaredAttributes
from flask_solidq.definitions.step_options import Default
from flask_solidq.definitions.step_options import check_max_resumptions
from flask_solidq.definitions.step_options import check_resume_errors
from flask_solidq.errors import DeserializationError
from flask_solidq.errors import SerializationError
from flask_solidq.errors import StepsChanged
from flask_solidq.values import JobArgument
from flask_solidq.values import JSONValue

R = t.TypeVar("R")


class JobInterrupted(BaseException):  # noqa: N818 - a signal to unwind, like KeyboardInterrupt
    """Raised by ``advance``/``checkpoint`` while the worker is stopping; the worker puts the
    job back to its queue with its progress. A ``BaseException``, so a job's own ``except
    Exception`` doesn't swallow it (Rails' ``Continuation::Interrupt`` is not a
    ``StandardError`` for the same reason)."""


class ProgressView(t.TypedDict):
    """A job's step progress as ``current_job.step_progress`` shows it."""

    done: list[str]
    #: ``[name, cursor]`` of the step in progress, or None between steps.
    current: list[JobArgument] | None
    resumptions: int


class Progress:
    """A job's steps: the ones done, the current one and its cursor, how many times the job
    resumed; and, for this run, the names met so far and what says the worker is stopping."""

    def __init__(self) -> None:
        self.done: list[str] = []
        #: (step name, cursor) of the step in progress, or None between steps.
        self.current: tuple[str, JobArgument] | None = None
        self.resumptions = 0
        self.stopping: t.Callable[[], bool] = never_stopping
        #: Writes the job's payload (a worker's run, with ``SOLIDQ_STEP_SAVE_INTERVAL``).
        self.saver: t.Callable[[], object] | None = None
        self.save_interval = 0.0
        self.saved_at = time.monotonic()
        #: The step names met in this run, in order.
        self.met: list[str] = []
        self.ran_one = False
        #: Whether this run saved anything new: a cursor advanced, or a step finished.
        self.advanced = False
        #: What was saved when the run began: (done, current step's name).
        self.loaded: tuple[tuple[str, ...], str | None] = ((), None)

    @property
    def saved(self) -> bool:
        """Whether there is progress to resume from."""
        return bool(self.done) or self.current is not None

    @property
    def any(self) -> bool:
        """Whether the payload has anything of steps to keep."""
        return self.saved or self.resumptions > 0

    def new_run(self) -> None:
        """Start another run of the same job object (a test performing it again by hand):
        from its steps so far, with none met in this run yet."""
        self.met.clear()
        self.ran_one = False

    def checkpoint(self) -> None:
        """Raise :class:`JobInterrupted` if the worker is stopping."""
        if self.stopping():
            raise JobInterrupted(self.describe())

    def save(self, *, due_only: bool = False) -> None:
        """Write the progress now (or, with ``due_only``, if ``save_interval`` has passed
        since the last write), when a saver is set."""
        if self.saver is None:
            return
        if due_only and time.monotonic() - self.saved_at < self.save_interval:
            return
        self.saver()
        self.saved_at = time.monotonic()

    def describe(self) -> str:
        """Where the job is, for the log: ``at step 'embed'``. Never the cursor: it comes
        from the job's data, which no log line holds (the job's page and ``flask solidq job``
        show it)."""
        if self.current is None:
            return f"after step {self.done[-1]!r}" if self.done else "before its first step"
        name, _cursor = self.current
        return f"at step {name!r}"

    def payload_keys(self) -> dict[str, JSONValue]:
        """Its keys in the job's payload (none when there is nothing to keep)."""
        if not self.any:
            return {}
        steps: dict[str, JSONValue] = {"done": list[JSONValue](self.done)}
        if self.current is not None:
            name, cursor = self.current
            steps["current"] = [name, dump_cursor(name, cursor)]
        return {"steps": steps, "resumptions": self.resumptions}

    @classmethod
    def from_payload(cls, data: t.Mapping[str, JSONValue]) -> Progress:
        """The progress a stored payload holds.

        :raises flask_solidq.DeserializationError: it is malformed, or a cursor can't be
            loaded.
        """
        return load(data)

    def as_dict(self) -> ProgressView:
        """What ``current_job.step_progress`` shows: a copy, cursors as they are in memory."""
        return {
            "done": list(self.done),
            "current": None if self.current is None else list(self.current),
            "resumptions": self.resumptions,
        }


def never_stopping() -> bool:
    return False


class Step:
    """One running step: ``cursor`` (None at first, the saved one on resume), ``advance`` and
    ``checkpoint``."""

    def __init__(self, name: str, cursor: JobArgument, progress: Progress) -> None:
        self.name = name
        self._cursor = cursor
        self._progress = progress

    @property
    def cursor(self) -> t.Any:  # Any: the job's own value, whose type its step knows
        """Where the step got to: what the last ``advance`` set, or the saved one."""
        return self._cursor

    def advance(self, cursor: JobArgument) -> None:
        """Set the cursor (kept with the job's progress; written if ``SOLIDQ_STEP_SAVE_INTERVAL``
        passed since the last write), then checkpoint.

        :raises flask_solidq.SerializationError: the cursor can't be stored; checked here, so
            the error shows where it was made, not when the job is stored.
        """
        dump_cursor(self.name, cursor)
        self._cursor = cursor
        self._progress.current = (self.name, cursor)
        self._progress.advanced = True
        self._progress.save(due_only=True)
        self._progress.checkpoint()

    def checkpoint(self) -> None:
        """Interrupt the job here if the worker is stopping (raises :class:`JobInterrupted`,
        which the worker handles); otherwise do nothing. Saves nothing new."""
        self._progress.checkpoint()

    def __repr__(self) -> str:
        return f"<Step {self.name!r} cursor={self._cursor!r}>"


class Resumable(DeclaredAttributes):
    """The base of ``Job``: what it declared (:class:`DeclaredAttributes`) and what it has of
    steps: ``step``, ``step_progress`` and the class keyword ``max_resumptions=`` (an int of 0
    or more, or None for no limit; by default ``SOLIDQ_MAX_RESUMPTIONS``)."""

    #: How many times a job of this definition may resume from saved progress.
    max_resumptions: t.ClassVar[int | None | Default] = Default.CONFIG
    #: Errors that resume the job from its saved step (back to its queue at once, counting a
    #: resumption) when raised after the run advanced, instead of failing or retrying it.
    resume_errors: t.ClassVar[tuple[type[Exception], ...]] = ()

    def __init_subclass__(
        cls,
        *,
        max_resumptions: int | None | Default = Default.CONFIG,
        **kwargs: object,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if max_resumptions is not Default.CONFIG:
            where = f"{cls.__qualname__}'s max_resumptions="
            cls.max_resumptions = check_max_resumptions(max_resumptions, where=where)
        if "resume_errors" in cls.__dict__:
            where = f"{cls.__qualname__}.resume_errors"
            cls.resume_errors = check_resume_errors(cls.__dict__["resume_errors"], where=where)

    def step(self, name: str, function: t.Callable[..., R], *args: JobArgument) -> R | None:
        """Run ``function(step, *args)`` as the step ``name``, unless it finished in an earlier
        run of this job (then return None without calling it).

        :raises ValueError: ``name`` is empty, or was met already in this run.
        """
        return run_step(self, name, function, args)

    @property
    def _steps(self) -> Progress:
        """Its progress: made at first use (most jobs have no steps, and a worker runs
        thousands a second), with what :func:`watch` gave; replaced by :meth:`_load_steps`."""
        progress = self.__dict__.get("_progress")
        if not isinstance(progress, Progress):
            progress = self.__dict__["_progress"] = Progress()
            apply_watch(self, progress)
        return progress

    def _steps_payload_keys(self) -> dict[str, JSONValue]:
        """The keys of its progress in its payload: none, without making the progress, for a
        job that has none yet (every job being enqueued for the first time; a bulk enqueue of
        thousands otherwise made a progress object for each, only to find it empty)."""
        progress = self.__dict__.get("_progress")
        return progress.payload_keys() if isinstance(progress, Progress) else {}

    def _load_steps(self, data: t.Mapping[str, JSONValue]) -> None:
        """Take the progress a stored payload holds (``Job.load_payload``); a payload with
        none leaves it to be made at first use.

        :raises flask_solidq.DeserializationError: it is malformed.
        """
        if "steps" in data or "resumptions" in data:
            self.__dict__["_progress"] = progress = Progress.from_payload(data)
            apply_watch(self, progress)
        else:
            self.__dict__.pop("_progress", None)

    @property
    def step_progress(self) -> ProgressView:
        """The job's step progress: ``{"done": [names], "current": [name, cursor] or None,
        "resumptions": n}`` (a copy)."""
        return self._steps.as_dict()


def run_step(
    job: Resumable, name: str, function: t.Callable[..., R], args: tuple[JobArgument, ...]
) -> R | None:
    """Run ``function(step, *args)`` as the step ``name`` of ``job`` unless it finished in an
    earlier run; return what it returns (None when skipped). Every step but the first that
    runs in this run checkpoints first (Rails does the same)."""
    progress = job._steps
    _check_name(progress, name)
    _check_order(progress, name)
    progress.met.append(name)
    if name in progress.done:
        return None
    if progress.ran_one:
        progress.checkpoint()
    progress.ran_one = True
    cursor = progress.current[1] if progress.current and progress.current[0] == name else None
    progress.current = (name, cursor)
    result = function(Step(name, cursor, progress), *args)
    progress.done.append(name)
    progress.current = None
    progress.advanced = True
    progress.save()
    return result


def _check_name(progress: Progress, name: object) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"A step's name must be a non-empty string, not {name!r}.")
    if name in progress.met:
        raise ValueError(
            f"Step {name!r} was already met in this run: each step of a job needs its own name,"
            " since its name is what marks it done."
        )


def _check_order(progress: Progress, name: str) -> None:
    """Steps run in the order they were saved in (Rails' ``InvalidStepError``): the saved
    done steps come first, in order; then the step saved in progress.

    :raises flask_solidq.errors.StepsChanged: ``name`` comes where another was saved.
    """
    done, current = progress.loaded
    position = len(progress.met)
    if position < len(done) and done[position] != name:
        raise changed_error(done[position], "done", f"perform reached {name!r} first")
    if current is not None and current not in progress.met and name not in (current, *done):
        raise changed_error(current, "in progress", f"perform reached {name!r} first")


def changed_error(saved: str, how: str, what: str) -> StepsChanged:
    return StepsChanged(
        f"Step {saved!r} was saved as {how} but {what}: the job's steps changed since its"
        " progress was saved. Restore the step, or discard the job and enqueue it again."
    )


def apply_watch(job: Resumable, progress: Progress) -> None:
    watched = job.__dict__.get("_watch")
    if watched is not None:
        progress.stopping, progress.saver, progress.save_interval = watched
        progress.saved_at = time.monotonic()


def dump_cursor(name: str, cursor: JobArgument) -> JSONValue:
    """``cursor`` as JSON-ready data, through the argument codecs.

    :raises flask_solidq.SerializationError: it can't be stored; the message names the step.
    """
    try:
        return arguments.dump_args((cursor,))[0]
    except SerializationError as error:
        where = f"the cursor of step {name!r}"
        message = str(error).replace("argument 0", where, 1)
        raise SerializationError(message, position=where) from error.__cause__


def load(data: t.Mapping[str, JSONValue]) -> Progress:
    """The progress a stored payload holds (:meth:`Progress.from_payload`).

    :raises flask_solidq.DeserializationError: its ``steps`` or ``resumptions`` are malformed,
        or a cursor can't be loaded.
    """
    steps = data.get("steps", {})
    resumptions = data.get("resumptions", 0)
    if type(steps) is not dict or type(resumptions) is not int:
        raise DeserializationError(MALFORMED)
    done = steps.get("done", [])
    current = steps.get("current")
    if type(done) is not list or any(type(name) is not str for name in done):
        raise DeserializationError(MALFORMED)
    names = [str(name) for name in done]
    if current is not None and (
        type(current) is not list or len(current) != 2 or type(current[0]) is not str
    ):
        raise DeserializationError(MALFORMED)
    progress = Progress()
    progress.done = names
    progress.resumptions = resumptions
    if current is not None:
        progress.current = (str(current[0]), arguments.load_args([current[1]])[0])
    progress.loaded = (tuple(names), None if current is None else str(current[0]))
    return progress


MALFORMED = (
    'The stored payload\'s step progress is malformed: "steps" should be {"done":'
    ' [names], "current": [name, cursor]} and "resumptions" an int.'
)
