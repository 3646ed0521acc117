"""Steps and batches under random stops and kills, in real `flask solidq work` processes on
every backend: steps jobs of one batch count their units while workers are stopped (SIGTERM)
or killed (SIGKILL) and replaced at random moments, under either ``SOLIDQ_ON_WORKER_DEATH``.
Then: every job finished, every unit ran, and no unit ran twice past the cursor its job had
saved (with ``SOLIDQ_STEP_SAVE_INTERVAL = 0`` the only unit a kill may repeat is the one in
flight, the killed process's last of that job); the batch counted every job completed and
its callback ran once, after the last unit. ``SOLIDQ_STRESS_SEED=S`` replays seed S."""

from __future__ import annotations

import collections
import os
import random
import signal
import time
import typing as t

import pytest

from tests import support
from tests.jobs import steps as steps_jobs
from tests.support import concurrency as concurrency_support
from tests.support import runtime as runtime_support
from tests.support.runtime import WorkProcess

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

JOBS = 6
UNITS = 40
ROUNDS = 4
SEED = int(os.environ.get("SOLIDQ_STRESS_SEED") or 1)


class Units(t.NamedTuple):
    """Each unit's runs, as (pid, row id), by (label, n)."""

    by_unit: dict[tuple[str, int], list[tuple[int, int]]]
    #: label -> the row id of the last unit each pid ran of it.
    last_of: dict[str, dict[int, int]]


def units(engine: t.Any) -> Units:
    by_unit: dict[tuple[str, int], list[tuple[int, int]]] = collections.defaultdict(list)
    last_of: dict[str, dict[int, int]] = collections.defaultdict(dict)
    for row in runtime_support.runs(engine, "steps_test.unit"):
        label, n = str(row.value).split(":")
        by_unit[(label, int(n))].append((row.pid, row.id))
        last_of[label][row.pid] = row.id
    return Units(by_unit, last_of)


@pytest.mark.parametrize("policy", ["fail", "release"])
def test_steps_of_a_batch_resume_exactly_past_their_cursors_through_stops_and_kills(
    app, engine, launcher, policy
):
    rng = random.Random(f"{SEED}-{policy}")
    config = {
        "SOLIDQ_STEP_SAVE_INTERVAL": 0,
        "SOLIDQ_ON_WORKER_DEATH": policy,
        "SOLIDQ_SHUTDOWN_TIMEOUT": 5,
    }
    labels = [f"j{index}" for index in range(JOBS)]
    with app.app_context():
        with support.solidq.batch(on_finish=steps_jobs.batch_end) as batch:
            for label in labels:
                steps_jobs.count_labelled.perform_later(label, UNITS, rng.uniform(0.03, 0.06))

    def start() -> WorkProcess:
        return launcher.start("--processes", "2", "--threads", "2", config=config)

    work = start()
    support.wait_until(lambda: runtime_support.runs(engine, "steps_test.unit"), timeout=30)
    killed: set[int] = set()
    for _round in range(ROUNDS):
        time.sleep(rng.uniform(0.2, 0.6))
        replacement = start()
        if rng.random() < 0.5:
            killed |= concurrency_support.group_pids(work.pid)
            work.kill()
        else:
            work.signal(signal.SIGTERM)
        work = replacement

    support.wait_until(
        lambda: len(runtime_support.runs(engine, "steps_test.batch_end")) == 1, timeout=90
    )
    found = units(engine)
    problems = []
    for label in labels:
        for n in range(UNITS):
            ran = found.by_unit.get((label, n), [])
            if not ran:
                problems.append(f"{label}:{n} never ran")
            # Every run but the last was a killed process's last unit of the job.
            for pid, row_id in ran[:-1]:
                if pid not in killed or found.last_of[label][pid] != row_id:
                    problems.append(f"{label}:{n} ran again past its saved cursor: {ran}")
    repeated = sum(len(ran) - 1 for ran in found.by_unit.values())
    print(f"seed {SEED} {policy}: {len(killed)} processes killed, {repeated} units repeated")
    closed = [row.value for row in runtime_support.runs(engine, "steps_test.closed")]
    assert sorted(set(closed)) == labels, closed
    assert not problems, f"seed {SEED}: kills {sorted(killed)}\n" + "\n".join(problems)
    (end,) = runtime_support.runs(engine, "steps_test.batch_end")
    assert end.value == f"{batch.id}:{JOBS}:0"
    last_unit = max(row.started_at for row in runtime_support.runs(engine, "steps_test.unit"))
    assert end.started_at > last_unit
    with app.app_context():
        done = support.solidq.batches.find(batch.id)
    assert done is not None and done.status.value == "completed"
    assert (done.total_jobs, done.completed_jobs, done.failed_jobs) == (JOBS, JOBS, 0)
