"""Batches finished by real worker processes: their last jobs finish at the same moment in
different processes, and each callback still runs exactly once (issue 21's bar: 4 processes,
1,000-job batches, 20 runs, on every backend)."""

from __future__ import annotations

import json
import os
import time

import pytest
import sqlalchemy as sa

from flask_solidq import BatchAlreadyFinished
from tests import support
from tests.jobs import batch as batch_jobs
from tests.support import runtime as runtime_support
from tests.support import solidq
from tests.support.runtime import CLAIMED
from tests.support.runtime import READY
from tests.support.runtime import SCHEDULED

pytestmark = [pytest.mark.processes, pytest.mark.slow]

#: Nothing here tests pruning, and 4 processes x 3 threads finishing 20,000 jobs through one
#: SQLite file can hold a heartbeat's write off past the fast settings' 3 s on a loaded
#: machine: the supervisor would then prune a live worker and fail its jobs.
shared_worker = runtime_support.shared_worker_fixture(
    "--processes", "4", "--threads", "3", config={"SOLIDQ_PROCESS_ALIVE_THRESHOLD": 60}
)
shared_queue = runtime_support.shared_queue

#: Batches per backend (SOLIDQ_BATCH_RUNS to try more), each of JOBS_PER_BATCH jobs; every
#: other one has FAILING jobs that fail for good.
RUNS = int(os.environ.get("SOLIDQ_BATCH_RUNS", "20"))
JOBS_PER_BATCH = 1000
FAILING = 2


def settled(engine) -> bool:
    return not any(support.count(engine, table) for table in (READY, SCHEDULED, CLAIMED))


def unexpected_failures(engine: sa.Engine) -> list[object]:
    """The errors of failed jobs that aren't ``batch_test.fail``'s own."""
    return [
        (job_id, error.get("exception_class"), error.get("message"))
        for job_id, error in runtime_support.failures(engine).items()
        if not str(error.get("exception_class")).endswith("Boom")
    ]


def test_every_callback_of_batches_finished_by_four_processes_at_once_runs_exactly_once(
    shared_queue,
):
    app, engine = shared_queue.app, shared_queue.engine
    expected: dict[str, list[object]] = {}
    with app.app_context():
        for run in range(RUNS):
            failing = FAILING if run % 2 else 0
            with solidq.batch(
                on_success=batch_jobs.recorded_callback.new("success"),
                on_failure=batch_jobs.recorded_callback.new("failure"),
                on_finish=batch_jobs.recorded_callback.new("finish"),
                run=run,
            ) as batch:
                solidq.perform_all_later(
                    [batch_jobs.work.new(n) for n in range(JOBS_PER_BATCH - failing)]
                    + [batch_jobs.fail.new(n) for n in range(failing)]
                )
            status = "failed" if failing else "completed"
            counts = [status, JOBS_PER_BATCH, JOBS_PER_BATCH - failing, failing, 0]
            expected[f"{batch.id}:finish"] = counts
            expected[f"{batch.id}:{'failure' if failing else 'success'}"] = counts

    def callbacks() -> list[str]:
        return [run.value for run in runtime_support.runs(engine, "batch_test.recorded_callback")]

    # A second run of a callback would be stored in the transaction that finished its batch,
    # as the first is: once the queue is empty, every callback stored has run.
    support.wait_until(lambda: len(callbacks()) >= len(expected) and settled(engine), timeout=180)

    runs = runtime_support.runs(engine, "batch_test.recorded_callback")
    # Each exactly once; a job failed where none should have: its error says why.
    assert sorted(run.value for run in runs) == sorted(expected), unexpected_failures(engine)
    counts = {run.value: json.loads(run.data) for run in runs}
    assert counts == expected, unexpected_failures(engine)
    with app.app_context():
        for key in expected:
            found = solidq.batches.find(int(key.split(":")[0]))
            assert found.finished_at is not None
            assert found.completed_jobs + found.failed_jobs == found.total_jobs == JOBS_PER_BATCH
    assert len(runtime_support.failures(engine)) == FAILING * (RUNS // 2)


#: Batches the race test runs per backend, and the most adds it tries on each. Every race
#: ends in an add meeting the finish, however many came before; with 200 most races on
#: MariaDB reached the cap and waited for the workers to catch up (27-51 s of the suite).
RACES = 20
MOST_ADDS = 60


def test_adding_from_another_process_races_the_finish_and_either_counts_or_raises(shared_queue):
    """Seed 003: adding to a batch from outside its jobs races the batch finishing. The test
    process adds one job at a time while the workers finish the batch's jobs: each add is
    either counted (its job runs, and the callback sees it in the total) or raises
    BatchAlreadyFinished (nothing of it stored), and the callback runs once."""
    app, engine = shared_queue.app, shared_queue.engine
    expected: dict[str, list[object]] = {}
    with app.app_context():
        for _race in range(RACES):
            with solidq.batch(on_finish=batch_jobs.recorded_callback.new("finish")) as batch:
                batch_jobs.work.perform_later(0)
            added = 0
            deadline = time.monotonic() + 60
            # Adds until one loses the race. Past MOST_ADDS the blocks enqueue nothing, so the
            # workers catch up and the batch finishes: every race ends in a refused add.
            while True:
                try:
                    with solidq.batches.find(batch.id).enqueue():
                        if added < MOST_ADDS:
                            batch_jobs.work.perform_later(added + 1)
                except BatchAlreadyFinished:
                    break
                added = min(added + 1, MOST_ADDS)
                assert time.monotonic() < deadline, f"batch {batch.id} never finished"
            expected[f"{batch.id}:finish"] = ["completed", 1 + added, 1 + added, 0, 0]

    def callbacks() -> list[str]:
        return [run.value for run in runtime_support.runs(engine, "batch_test.recorded_callback")]

    support.wait_until(lambda: len(callbacks()) >= len(expected) and settled(engine), timeout=120)
    runs = runtime_support.runs(engine, "batch_test.recorded_callback")
    counts = {run.value: json.loads(run.data) for run in runs}
    assert counts == expected, unexpected_failures(engine)
    assert len(runs) == len(expected)
