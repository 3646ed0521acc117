"""Blinker signals of flask-solidq.

Connect with ``signals.enqueue.connect(receiver)``, or ``connect(receiver, sender=SomeJob)`` for
one job definition. For job events the sender is the job definition (the class; for
``@solidq.job`` functions, the definition the decorator returned) and the payload is sent as
keyword arguments. Signals are sent synchronously, in the thread that did the work: keep
receivers quick.

Signals of something stored (a job's outcome: ``retry``, ``discard``, ``fail``; the operations
``claim``, ``release`` and ``prune``) are sent once it has committed, so a receiver never sees
a state that rolls back, and reads it in the database if it looks. They are sent with
:func:`send_safely`: the work is done, so a receiver that raises can't undo it; its error is
logged and the queue carries on. An error of a receiver of ``enqueue`` reaches the code that
enqueued; one of ``perform_start`` or ``perform``, the job's run (it counts as the job's error).
"""

from __future__ import annotations

import inspect
import logging
import typing as t

from blinker import Namespace
from blinker import Signal

if t.TYPE_CHECKING:
    from blinker import NamedSignal

logger = logging.getLogger("flask_solidq")

_signals = Namespace()

enqueue = _signals.signal("enqueue")
"""A job was stored. Payload: ``job``. Inside :meth:`SolidQ.transaction` the commit is still
to come, so the outcome is provisional."""

perform_start = _signals.signal("perform-start")
"""A worker is about to perform a job. Payload: ``job``."""

perform = _signals.signal("perform")
"""A job's perform returned. Payload: ``job`` (``job.coalesced_calls`` holds the calls of a
collecting job)."""

retry = _signals.signal("retry")
"""A job raised and its next attempt was stored. Payload: ``job``, ``error``, ``wait``
(seconds). Sent by the worker's finisher once the retry committed, in an app context."""

discard = _signals.signal("discard")
"""A job raised an error a ``discard_on`` rule (or a ``retry_on`` fallback) handles, and it was
stored as finished without failing. Payload: ``job``, ``error``. Sent once that committed."""

fail = _signals.signal("fail")
"""A job failed and its failed execution was stored, to wait for a human. Payload: ``job``
(None when the job could not be loaded), ``error`` (the exception), ``provider_job_id``. Sent
by the worker's finisher once the failure committed, in an app context: a receiver that reads
the database finds the failed execution. An outcome that isn't stored (the worker lost the
job's claim, pruned as dead) sends nothing. The place to report a job's failure to an error
tracker (``job`` has ``job_id``, ``provider_job_id``, ``queue_name``, ``executions``)."""

coalesce = _signals.signal("coalesce")
"""A call was admitted by ``coalesce``. Payload: ``status``, ``key``, ``job_id`` (the open
job's row), ``active_job_id`` (the call's own job id), ``class_name``."""

drop_coalesced_call = _signals.signal("drop-coalesced-call")
"""A collected call was skipped on this attempt because its record is gone. Payload:
``call_id``, ``job_id``, ``active_job_id``, ``class_name``, ``exception_class``."""

defer_rate_limited = _signals.signal("defer-rate-limited")
"""A claim deferred jobs of one definition over its rate limit. Payload: ``class_name``,
``keys``, ``job_ids``, ``size``."""

rate_limit_back_off = _signals.signal("rate-limit-back-off")
"""Rate-limit budgets were paused: a job raised ``RateLimited`` (the API it calls said 429),
or the app called ``rate_limiter.back_off``. Payload: ``keys`` (the budgets paused),
``until`` (an aware datetime, by the database's clock: they admit nothing before it; a
longer pause already there is kept), ``job_id`` and ``class_name`` (the job's row and name;
None from ``back_off``). The sender is the job's definition (None from ``back_off``). Sent
once the pause committed, once per job (a job without a budget pauses none: ``keys`` is
empty, and ``until`` is when it runs again at the earliest)."""

release_blocked = _signals.signal("release-blocked")
"""A blocked job's turn came: ``released`` says whether it became ready. Payload: ``job_id``,
``concurrency_key``, ``released``."""

claim = _signals.signal("claim")
"""A worker claimed ready jobs (Solid Queue's ``claim``). Payload: ``process_id`` (the
worker's row in ``solidq_processes``), ``job_ids`` (the claimed jobs' rows), ``size``. Sent
once per poll that claimed something, after the claims committed."""

release = _signals.signal("release")
"""Claimed jobs went back to ready, to run again (Solid Queue's ``release_many_claimed``).
Payload: ``process_id`` (whose claims they were; None for claims without a process),
``reason`` (:class:`~flask_solidq.operations.release.ReleaseReason`: ``"shutdown"``, the worker
stopped before they finished; ``"stray"``, claims none of its threads held; ``"process_gone"``,
their process died, was pruned or is missing, under ``SOLIDQ_ON_WORKER_DEATH = "release"``),
``job_ids``, ``size``. Sent after the release committed, once per process."""

prune = _signals.signal("prune")
"""A supervisor pruned processes that had stopped heartbeating (Solid Queue's
``prune_processes``); their claims were failed or released as ``SOLIDQ_ON_WORKER_DEATH`` says.
Payload: ``process_ids``, ``names``, ``size``. Sent after the pruning committed, when it
pruned any."""

batch_finish = _signals.signal("batch-finish")
"""A batch finished: nothing in it is pending, and its callbacks are stored (``on_success``
or ``on_failure``, and ``on_finish``). Payload: ``batch``
(:class:`~flask_solidq.definitions.batches.Batch`, as the finish left it), ``status``
(``"completed"``, no job failed for good; ``"failed"``). Sent once per batch, after the
commit that finished it."""

thread_error = _signals.signal("thread-error")
"""One of the queue's own threads hit an error and carries on (Solid Queue's
``thread_error``); ``SOLIDQ_ON_THREAD_ERROR`` is called with the same error. Payload:
``error`` (the exception), ``where``
(:class:`~flask_solidq.processes.thread_errors.ThreadActivity`: ``"poll"``, a worker's claim, a
dispatcher's dispatch or the scheduler's enqueue; ``"finish"``, storing outcomes;
``"heartbeat"``; ``"maintenance"``, a supervisor's pruning; ``"shutdown"``, deregistering),
``process`` (the process's name, as ``solidq_processes.name``). A database outage sends it for
its first error only, as the log warns once. A job's own errors are not thread errors: they
send ``fail`` (or ``retry``, ``discard``)."""


#: The receivers :func:`send` knows are plain functions, by id (each kept alive by whoever
#: declared it: the log subscriber's, module constants).
_plain_receivers: dict[int, t.Callable[..., object]] = {}


def declare_plain(receiver: t.Callable[..., object]) -> None:
    """Declare ``receiver`` a plain function (never a coroutine function) for :func:`send`,
    which then calls it without asking. ``receiver`` must stay alive as long as the process
    sends signals (a module's constant)."""
    if inspect.iscoroutinefunction(receiver):
        raise TypeError(f"{receiver!r} is a coroutine function.")
    _plain_receivers[id(receiver)] = receiver


#: A signal's payload as its receivers get it: the keywords it was sent with. Any: each
#: signal has keys and types of its own (listed with it above), which a receiver reads
#: without narrowing each one.
Payload = t.Mapping[str, t.Any]


# Any for the payloads: blinker's send takes them beside a keyword of its own
# (``_async_wrapper``), so payloads typed object would not pass to it.
def send(signal: NamedSignal, sender: object, **payload: t.Any) -> None:
    """``signal.send(sender, **payload)``, what a job's run sends on every job
    (``perform_start``, ``perform``).

    blinker's ``send`` asks ``inspect.iscoroutinefunction`` of every receiver on every send
    (it refuses a coroutine function without an async wrapper): two microseconds a job for
    the log subscriber's receivers alone. This one skips the question for the receivers
    declared with :func:`declare_plain`, and is otherwise blinker's: the same receivers
    through ``receivers_for`` (those of ``sender`` and of any sender, dead weak ones
    dropped), in the same order, nothing sent while muted, the same ``RuntimeError`` for a
    coroutine function. A signal whose ``send`` was replaced (a test's mock) is sent through
    it.
    """
    if type(signal).send is not Signal.send or "send" in vars(signal):
        signal.send(sender, **payload)
        return
    if signal.is_muted or not signal.receivers:
        return
    for receiver in signal.receivers_for(sender):
        if _plain_receivers.get(id(receiver)) is not receiver and inspect.iscoroutinefunction(
            receiver
        ):
            raise RuntimeError("Cannot send to a coroutine function.")
        receiver(sender, **payload)


# Any: as for send.
def send_safely(signal: NamedSignal, sender: object, **payload: t.Any) -> None:
    """Send ``signal`` for something already done: a receiver that raises is logged, and
    neither undoes it nor stops the thread sending. The receivers after it miss this one."""
    if not signal.receivers:
        return
    try:
        signal.send(sender, **payload)
    # Past the commit there is nothing to fail: the queue's thread logs and goes on.
    except Exception:
        logger.exception("SolidQ: a receiver of the %s signal raised", signal.name)
