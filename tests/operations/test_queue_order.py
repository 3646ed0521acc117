"""The order one worker thread takes jobs in: its queues in order, then priority, then enqueue
order; ``prefix*`` queues; and queues it wasn't given are never worked."""

from __future__ import annotations

import pytest

from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import READY

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

#: (value, queue, priority), in enqueue order.
ENQUEUED = [
    ("mail_b", "mail_b", 0),
    ("default-p7-first", "default", 7),
    ("other", "other", 0),
    ("default-p0-first", "default", 0),
    ("high-p9", "high", 9),
    ("default-p3", "default", 3),
    ("mail_a", "mail_a", 0),
    ("default-p0-second", "default", 0),
    ("high-p0", "high", 0),
    ("default-p7-second", "default", 7),
]


def test_one_thread_works_its_queues_in_order_then_by_priority_then_in_enqueue_order(
    app, engine, launcher
):
    with app.app_context():
        ids = {
            value: worker_jobs.record.set(queue=queue, priority=priority)
            .perform_later(value)
            .provider_job_id
            for value, queue, priority in ENQUEUED
        }

    launcher.start("--queues", "high,default,mail*", "--threads", "1")
    support.wait_until(lambda: len(runtime_support.runs(engine)) == len(ENQUEUED) - 1)

    order = [run.value for run in runtime_support.runs(engine)]
    assert order[:7] == [
        "high-p0",
        "high-p9",
        "default-p0-first",
        "default-p0-second",
        "default-p3",
        "default-p7-first",
        "default-p7-second",
    ]
    assert sorted(order[7:]) == ["mail_a", "mail_b"]
    # "other" is in none of the worker's queues: it stays ready.
    support.wait_until(lambda: len(runtime_support.finished_ids(engine)) == len(ENQUEUED) - 1)
    assert [row.job_id for row in support.rows(engine, READY)] == [ids["other"]]
    assert len({run.thread for run in runtime_support.runs(engine)}) == 1
