"""What each of flask-solidq's log records is about: :class:`LogEvent`, the ``event`` field
every record of the subscriber, the supervisor and the worker carries in ``extra=``, so a log
pipeline can filter on it without parsing the message."""

from __future__ import annotations

import enum


class LogEvent(str, enum.Enum):
    """What one of flask-solidq's records is about: its ``event`` field."""

    ENQUEUE = "enqueue"
    JOB_STARTED = "job_started"
    JOB_FINISHED = "job_finished"
    JOB_RETRIED = "job_retried"
    JOB_DISCARDED = "job_discarded"
    JOB_FAILED = "job_failed"
    JOB_INTERRUPTED = "job_interrupted"
    JOB_DEFERRED = "job_deferred"
    PERFORM = "perform"
    RETRY = "retry"
    DISCARD = "discard"
    FAIL = "fail"
    COALESCE = "coalesce"
    DROP_COALESCED_CALL = "drop_coalesced_call"
    DEFER_RATE_LIMITED = "defer_rate_limited"
    RATE_LIMIT_BACK_OFF = "rate_limit_back_off"
    RELEASE_BLOCKED = "release_blocked"
    CLAIM = "claim"
    RELEASE = "release"
    PRUNE = "prune"
    THREAD_ERROR = "thread_error"
    BATCH_FINISH = "batch_finish"
    #: A supervisor was asked to stop: it says what it waits for.
    STOPPING = "stopping"
    #: A supervisor was asked to stop at once.
    STOPPING_NOW = "stopping_now"
    #: Running jobs went back to ready at shutdown.
    JOBS_RELEASED = "jobs_released"
    #: A worker's queue that no job definition uses.
    UNUSED_QUEUE = "unused_queue"
    #: A recurring task's queue that none of the supervisor's workers serves.
    UNSERVED_QUEUE = "unserved_queue"
