"""Blinker signals of flask-solidq.

Connect with ``signals.enqueue.connect(receiver)``, or ``connect(receiver, sender=SomeJob)`` for
one job definition. For job events the sender is the job definition (the class; for
``@solidq.job`` functions, the definition the decorator returned) and the payload is sent as
keyword arguments. Signals are sent synchronously, in the thread that did the work: keep
receivers quick, and don't raise from them unless you mean to fail the operation.
"""

from __future__ import annotations

from blinker import Namespace

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
"""A job raised and a new attempt was scheduled. Payload: ``job``, ``error``, ``wait``
(seconds)."""

discard = _signals.signal("discard")
"""A job raised an error a ``discard_on`` rule handles; it finished without failing. Payload:
``job``, ``error``."""

fail = _signals.signal("fail")
"""A job failed and was kept as a failed execution. Payload: ``job`` (None when the job could
not be loaded), ``error``, ``provider_job_id``."""

coalesce = _signals.signal("coalesce")
"""A call was admitted by ``coalesce``. Payload: ``status``, ``key``, ``job_id`` (the open
job's row), ``active_job_id`` (the call's own job id), ``class_name``."""

drop_coalesced_call = _signals.signal("drop-coalesced-call")
"""A collected call was skipped on this attempt because its record is gone. Payload:
``call_id``, ``job_id``, ``active_job_id``, ``class_name``, ``exception_class``."""

defer_rate_limited = _signals.signal("defer-rate-limited")
"""A claim deferred jobs of one definition over its rate limit. Payload: ``class_name``,
``keys``, ``job_ids``, ``size``."""

release_blocked = _signals.signal("release-blocked")
"""A blocked job's turn came: ``released`` says whether it became ready. Payload: ``job_id``,
``concurrency_key``, ``released``."""
