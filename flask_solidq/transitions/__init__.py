"""Transitions: the only writers of a job's state, that is of its row and of its executions
(ready, scheduled, claimed, blocked, failed).

Every module that moves a job (an enqueue, a claim, a finisher, a release, the dispatcher, a
control's hook, a person's action) decides when; a function here is how, named for the
change, in the caller's transaction. ``tests/transitions/test_only_writers.py`` holds that no
module outside this package (and the dialects' fast paths in ``storage/dialects``, which
write the same rows in one statement) writes those tables.

==========================  ==============================================================
change                      writer
==========================  ==============================================================
enqueue                     :data:`jobs.INSERT_JOB`, :mod:`enqueue_statements` (the
                            dialect's single enqueue), :func:`executions.make_ready`,
                            :func:`executions.schedule`, :func:`executions.block`
dispatch (due)              :func:`executions.take_due` then ``make_ready``
run now                     :func:`executions.due_now`, :func:`executions.reschedule`
claim                       :func:`executions.take_ready`, :func:`claims.claim`
release, defer, interrupt   :func:`claims.give_back`, :func:`claims.take`, then
                            ``make_ready`` or ``schedule``
unblock                     :func:`executions.unblock`
retry (own rules)           :func:`claims.delete_held`, :func:`jobs.retry`
finish, fail, discard,      :mod:`ends`, called only by
retry by hand               :mod:`flask_solidq.operations.job_ends`, which runs the hooks
                            every end reaches in one order: attempt history, the coalesce
                            key, the batch's counts (in the transaction); the controls'
                            FINISH hooks, then signals (after the commit)
prune                       :func:`jobs.prune`
==========================  ==============================================================
"""
