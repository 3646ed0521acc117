"""``Job``: the class form of a job definition, and the instance every job is.

Subclassing registers a job::

    class SyncStripeJob(solidq.Job):
        queue_name = "stripe"

        def perform(self, account_id): ...

    SyncStripeJob.perform_later(42)                      # enqueue; returns the Job instance
    SyncStripeJob.set(wait=30, priority=5).perform_later(42)
    SyncStripeJob.new(42).set(queue="low")               # build one, for perform_all_later

``perform_later``, ``perform_now`` and ``set`` work on the class (with the arguments) and on an
instance (which already holds them).
"""

from __future__ import annotations

import datetime as dt
import functools
import typing as t

from flask_solidq import current
from flask_solidq import identifiers
from flask_solidq import signals
from flask_solidq import slots
from flask_solidq.definitions import arguments
from flask_solidq.definitions import batches
from flask_solidq.definitions import job_checks
from flask_solidq.definitions import job_ids
from flask_solidq.definitions import job_methods
from flask_solidq.definitions import job_payloads
from flask_solidq.definitions.argument_checks import ArgumentChecks
from flask_solidq.definitions.batches import Batch
from flask_solidq.definitions.calls import Call
from flask_solidq.definitions.calls import job_data_of
from flask_solidq.definitions.configured_job import EnqueueOptions
from flask_solidq.definitions.rate_usage import RateLimitUsage
from flask_solidq.definitions.steps import Resumable
from flask_solidq.state import get_state
from flask_solidq.values import JobArgument
from flask_solidq.values import JSONValue

if t.TYPE_CHECKING:
    from flask_solidq.definitions.configured_job import ConfiguredJob
    from flask_solidq.state import SolidQState
    from flask_solidq.values import CoalesceStatus

JobT = t.TypeVar("JobT", bound="Job")

# The class's side of ``perform_later``, ``perform_now`` and ``set``
# (job_methods.ClassOrInstanceMethod binds them to the class); the job's side is in the class.


def _perform_later_on_class(cls: type[JobT], *args: JobArgument, **kwargs: JobArgument) -> JobT:
    """Enqueue the job and return it (never a bool): read ``provider_job_id``,
    ``successfully_enqueued`` and ``coalesce_status`` on it. On the class it takes the
    job's arguments; on a job, none.

    Requires an application context.

    :raises flask_solidq.SerializationError: an argument can't be stored; nothing was.
    :raises flask_solidq.EnqueueError: the database failed; the cause is chained.
    :raises flask_solidq.PendingMigrations: the tables don't exist yet.
    """
    return cls.new(*args, **kwargs).perform_later()


def _perform_now_on_class(cls: type[Job], *args: JobArgument, **kwargs: JobArgument) -> object:
    """Perform the job in this thread, now, and return what it returns. No table is
    touched and no control applies; exceptions propagate. A collecting job's
    ``perform_calls`` receives one call whose ``id`` is None."""
    return cls.new(*args, **kwargs).perform_now()


# Any as the return type: what a class job's ``perform`` returns is not part of its type, so
# ``perform_now`` gives it back as Any (see job_methods.PerformNow).
def _set_on_class(
    cls: type[JobT],
    *,
    wait: dt.timedelta | float | None = None,
    wait_until: dt.datetime | None = None,
    queue: str | None = None,
    priority: int | None = None,
) -> ConfiguredJob[..., JobT, t.Any]:
    """Enqueue options: ``wait=`` (seconds or a timedelta) or ``wait_until=`` (a datetime;
    naive means UTC), ``queue=``, ``priority=``. On the class it returns an object with
    ``perform_later``, ``perform_now`` and ``new``; on a job it sets them and returns the
    job."""
    options = EnqueueOptions(wait=wait, wait_until=wait_until, queue=queue, priority=priority)
    cls.new().set(**options)  # validate now, not at the first enqueue
    return _Configured(cls, options)


class _Configured(t.Generic[JobT]):
    """What ``set`` returns on a definition's class (typed as a ``ConfiguredJob``): makes the
    definition's jobs with the options."""

    def __init__(self, job_class: type[JobT], options: EnqueueOptions) -> None:
        self.job_class = job_class
        self.options = options

    def new(self, *args: JobArgument, **kwargs: JobArgument) -> JobT:
        return self.job_class.new(*args, **kwargs).set(**self.options)

    def perform_later(self, *args: JobArgument, **kwargs: JobArgument) -> JobT:
        return self.new(*args, **kwargs).perform_later()

    def perform_now(self, *args: JobArgument, **kwargs: JobArgument) -> object:
        return self.new(*args, **kwargs).perform_now()


#: How a job reaches its app's adapter (``perform_later``): the adapters run the operations,
#: a layer above the definitions, so :mod:`flask_solidq.extension.adapters` fills it.
ADAPTER: slots.Slot[t.Callable[[Job, SolidQState], None]] = slots.Slot(
    "flask_solidq.extension.adapters"
)


#: Registers a job definition under its name as its class is made: the registry reads job
#: definitions, so :mod:`flask_solidq.definitions.registry` fills it (the package imports it).
REGISTER: slots.Slot[t.Callable[[type[Job]], None]] = slots.Slot(
    "flask_solidq.definitions.registry"
)


#: Runs every ``perform_now`` (a worker's, the inline and test adapters', a direct call),
#: given the job and the run: :mod:`flask_solidq.tracing` fills it to run the job in a span.
AROUND_PERFORM_NOW: slots.Hook[t.Callable[[Job, t.Callable[[], object]], object]] = slots.Hook(
    "flask_solidq.tracing.spans"
)


class Job(Resumable, RateLimitUsage, ArgumentChecks):
    """A job definition (the class) and a job (an instance: arguments plus options).

    Class attributes a subclass may set: ``queue_name`` (``"default"``) and ``priority`` (0;
    lower runs first). Class keywords: ``name=`` (the stored job name; the class's
    ``__qualname__`` by default) and ``abstract=True`` (a base class that isn't a job itself).
    What the control decorators declared is read back through the attributes it inherits
    from :class:`~flask_solidq.definitions.declared.DeclaredAttributes`.
    """

    #: The name stored in ``solidq_jobs.class_name``; starts every control's key.
    job_name: t.ClassVar[str] = "Job"
    queue_name: str = "default"
    priority: int = 0
    #: The enqueuer's trace context (W3C ``traceparent``, ``tracestate``), kept in the
    #: payload's ``"trace"`` when :mod:`flask_solidq.tracing` stored one; None otherwise.
    _trace_context: dict[str, str] | None = None

    def __init_subclass__(
        cls, *, name: str | None = None, abstract: bool = False, **kwargs: t.Any
    ) -> None:
        # Any: the other bases' class keywords, whose types only they know.
        super().__init_subclass__(**kwargs)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise TypeError(f"A job's name must be a non-empty string, not {name!r}.")
        cls.job_name = name or cls.__qualname__
        identifiers.check_name(cls.job_name, f"name of job {cls.__qualname__}")
        job_checks.check_queue(cls.queue_name, where=f"{cls.__qualname__}.queue_name")
        job_checks.check_priority(cls.priority, where=f"{cls.__qualname__}.priority")
        if not abstract:
            job_checks.check_not_async(cls)
            REGISTER.call(cls)

    def __init__(self, *args: JobArgument, **kwargs: JobArgument) -> None:
        self._setup(args, kwargs)

    @classmethod
    def _blank(cls: type[JobT], job_id: str) -> JobT:
        """A job to load a stored payload into (a worker's), with its stored id."""
        job = object.__new__(cls)
        job._setup((), {}, job_id=job_id)
        return job

    def _setup(
        self,
        args: tuple[JobArgument, ...],
        kwargs: dict[str, JobArgument],
        job_id: str | None = None,
    ) -> None:
        #: The positional arguments (for a collecting job: its first call's).
        self.arguments: tuple[JobArgument, ...] = args
        #: The keyword arguments.
        self.kwargs: dict[str, JobArgument] = kwargs
        #: The job's own id, a UUID string (Active Job's ``job_id``).
        self.job_id: str = job_id or job_ids.new()
        #: The ``solidq_jobs`` row holding the job, once stored.
        self.provider_job_id: int | None = None
        #: The batch a worker's job belongs to (see :attr:`batch`); None otherwise.
        self.batch_id: int | None = None
        #: Whether the last enqueue stored the job; None until one was tried.
        self.successfully_enqueued: bool | None = None
        self._coalesce_status: CoalesceStatus | None = None
        #: The calls a collecting job performs, while it runs.
        self.coalesced_calls: list[Call] | None = None
        #: When the job is due: None for now.
        self.scheduled_at: dt.datetime | None = None
        #: When the job was last enqueued.
        self.enqueued_at: dt.datetime | None = None
        #: How many times the job has been performed, this run included.
        self.executions: int = 0
        #: Runs so far under each ``retry_on`` rule.
        self.exception_executions: dict[str, int] = {}
        self._wait: float | None = None
        #: How a stored coalesced job was opened ("discard", "replace", "collect"), as its
        #: payload records it; kept through retries, so a retry runs its calls again.
        self._coalesced_as: str | None = None

    @property
    def args(self) -> tuple[JobArgument, ...]:
        """The positional arguments (also ``arguments``)."""
        return self.arguments

    def __repr__(self) -> str:
        return (
            f"<{type(self).job_name} job_id={self.job_id!r} provider_job_id={self.provider_job_id}>"
        )

    # The work itself.

    # Any: a subclass's perform declares its own parameters, which object would forbid.
    def perform(self, *args: t.Any, **kwargs: t.Any) -> object:
        """Do the job's work. Subclasses implement it."""
        raise NotImplementedError(f"{type(self).__qualname__} must define perform().")

    def perform_calls(self, calls: list[Call]) -> object:
        """Do a collecting job's work over its ``calls``. Collecting subclasses implement it."""
        raise NotImplementedError(
            f"{type(self).__qualname__} collects calls, so it must define perform_calls(calls)."
        )

    # Building and configuring.

    @classmethod
    def new(cls: type[JobT], *args: t.Any, **kwargs: t.Any) -> JobT:
        """A job of this definition with these arguments, not enqueued yet."""
        # Any: a function job's ``new`` narrows them to its function's parameters.
        job = object.__new__(cls)
        job._setup(args, kwargs)
        return job

    def _set_on_instance(
        self: JobT,
        *,
        wait: dt.timedelta | float | None = None,
        wait_until: dt.datetime | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> JobT:
        if wait is not None and wait_until is not None:
            raise ValueError("set() takes wait= or wait_until=, not both.")
        if wait is not None:
            self._wait = job_checks.check_wait(wait)
            self.scheduled_at = None
        if wait_until is not None:
            self.scheduled_at = job_checks.check_wait_until(wait_until)
            self._wait = None
        if queue is not None:
            job_checks.check_queue(queue, where="set(queue=)")
            self.queue_name = queue
        if priority is not None:
            job_checks.check_priority(priority, where="set(priority=)")
            self.priority = priority
        return self

    set = job_methods.Set(_set_on_class, _set_on_instance)

    # Enqueuing and performing.

    def _perform_later_on_instance(self: JobT) -> JobT:
        ADAPTER.call(self, get_state())
        return self

    perform_later = job_methods.PerformLater(_perform_later_on_class, _perform_later_on_instance)

    def _perform_now_on_instance(self) -> object:
        around = AROUND_PERFORM_NOW.function
        if around is not None:
            return around(self, self._perform_now_here)
        return self._perform_now_here()

    def _perform_now_here(self) -> object:
        self.executions += 1
        if (progress := self.__dict__.get("_progress")) is not None:
            progress.new_run()  # performed again, by hand: a new run from its steps so far
        definition = type(self)
        signals.send(signals.perform_start, definition, job=self)
        with current.Performing(self):
            if self.is_collecting():
                if self.coalesced_calls is None:
                    job_data = functools.partial(job_data_of, self)
                    self.coalesced_calls = [Call(None, self.arguments, self.kwargs, job_data)]
                result = self.perform_calls(self.coalesced_calls)
            else:
                result = self.perform(*self.arguments, **self.kwargs)
        signals.send(signals.perform, definition, job=self)
        return result

    perform_now = job_methods.PerformNow(_perform_now_on_class, _perform_now_on_instance)

    # What an enqueue's arguments must fit (ArgumentChecks reads its signature).

    @classmethod
    def _performer(cls) -> t.Callable[..., object]:
        """What a worker calls with the job's arguments; its signature is what they must fit."""
        return cls.perform

    # Payloads.

    # Built and written by job_payloads: the functions themselves, so that encoding each job
    # of a bulk enqueue costs no call more.
    payload = job_payloads.payload
    encoded_payload = job_payloads.encoded_payload

    def load_payload(self, data: t.Mapping[str, JSONValue]) -> None:
        """Restore the arguments and counters of a stored payload into this job.

        :raises flask_solidq.DeserializationError: an argument can't be loaded.
        """
        self.executions, self.exception_executions = job_payloads.attempt_counters(data)
        coalesced_as = data.get("coalesce")
        self._coalesced_as = coalesced_as if type(coalesced_as) is str else None
        self.arguments = arguments.load_args(data.get("args", []))
        self.kwargs = arguments.load_kwargs(data.get("kwargs", {}))
        self._load_steps(data)
        if "trace" in data:
            self._trace_context = job_payloads.trace_context(data)

    def resolve_scheduled_at(self, now: dt.datetime) -> dt.datetime | None:
        """When the job is due, given that it is enqueued at ``now``; None if due now."""
        if self._wait:
            return now + dt.timedelta(seconds=self._wait)
        return self.scheduled_at

    def requests_wait(self) -> bool:
        """Whether ``set(wait=)`` or ``set(wait_until=)`` gave the job a schedule of its own
        (``set(wait=0)`` included): on a debounced definition, that replaces the window."""
        return self._wait is not None or self.scheduled_at is not None

    @property
    def coalesced_as(self) -> str | None:
        """How the stored job this instance was loaded from was opened by ``coalesce``
        (``"discard"``, ``"replace"`` or ``"collect"``); None for any other job."""
        return self._coalesced_as

    @property
    def coalesce_status(self) -> CoalesceStatus | None:
        """What coalescing did with this call (see :class:`CoalesceStatus`); None for a job
        that doesn't coalesce, or before its enqueue. Read-only: the enqueue records it."""
        return self._coalesce_status

    def mark_coalesced(self, status: CoalesceStatus | None) -> None:
        """Record what coalescing did with this call (the enqueue's, once it committed)."""
        self._coalesce_status = status

    @property
    def batch(self) -> Batch | None:
        """The batch this job belongs to, read fresh (None when it is in none, or outside a
        worker): ``with current_job.batch.enqueue():`` adds jobs to it, and this job, still
        running, keeps it open meanwhile. Requires an app context."""
        return None if self.batch_id is None else batches.find(self.batch_id)

    def mark_enqueued(self, now: dt.datetime) -> None:
        """Record that the job is being enqueued at ``now``: a relative ``wait`` becomes an
        absolute ``scheduled_at``."""
        self.scheduled_at = self.resolve_scheduled_at(now)
        self._wait = None
        self.enqueued_at = now
