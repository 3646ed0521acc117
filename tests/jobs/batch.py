"""Jobs for the batch tests (:mod:`tests.batches.test_batches`), performed in this process.
Each notes what it ran in :data:`PERFORMED`; a callback notes the batch it was given.

Every name starts with ``batch_test.`` (job names are process-wide).
"""

from __future__ import annotations

import typing as t

from flask_solidq import coalesce
from flask_solidq import current_job
from flask_solidq import discard_on
from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from flask_solidq import retry_on
from tests.support import solidq

#: (job name, what it ran) of every job performed in this process.
PERFORMED: list[tuple[str, t.Any]] = []


class Boom(Exception):
    """Raised on purpose."""


class Dropped(Exception):
    """Raised on purpose; the job is discarded."""


@solidq.job(name="batch_test.work")
def work(value: object) -> None:
    PERFORMED.append(("batch_test.work", value))


@solidq.job(name="batch_test.fail")
def fail(value: object) -> None:
    PERFORMED.append(("batch_test.fail", value))
    raise Boom(f"failing {value}")


@solidq.job(name="batch_test.retried")
@retry_on(Boom, wait=0, attempts=2, jitter=0)
def retried(value: object) -> None:
    PERFORMED.append(("batch_test.retried", value))
    raise Boom(f"failing {value}")


@solidq.job(name="batch_test.dropped")
@discard_on(Dropped)
def dropped(value: object) -> None:
    PERFORMED.append(("batch_test.dropped", value))
    raise Dropped(str(value))


@solidq.job(name="batch_test.callback")
def callback(batch: t.Any, label: object = None) -> None:
    PERFORMED.append(
        (
            "batch_test.callback",
            (
                label,
                batch.id,
                batch.status.value,
                batch.total_jobs,
                batch.completed_jobs,
                batch.failed_jobs,
                batch.pending_jobs,
            ),
        )
    )


@solidq.job(name="batch_test.reindex")
@coalesce(key=lambda product_id: product_id)
def reindex(product_id: object) -> None:
    PERFORMED.append(("batch_test.reindex", product_id))


@solidq.job(name="batch_test.collect")
@coalesce(key="all", on_conflict="collect", max_calls=2)
def collect(calls: list[t.Any]) -> None:
    PERFORMED.append(("batch_test.collect", [call.arguments for call in calls]))


@solidq.job(name="batch_test.importer")
def importer(supplier_id: object, product_ids: list[int]) -> None:
    """Seed 003's importer: adds a reindex per product to its own batch while it runs."""
    PERFORMED.append(("batch_test.importer", supplier_id))
    batch = current_job.batch
    assert batch is not None
    for product_id in product_ids:
        with batch.enqueue():  # one block per call, as docs/batches.md advises
            reindex.perform_later(product_id)


@solidq.job(name="batch_test.spawner")
def spawner(value: object) -> None:
    """Enqueues without ``current_job.batch.enqueue()``: that job is in no batch."""
    PERFORMED.append(("batch_test.spawner", value))
    work.perform_later(value)


@solidq.job(name="batch_test.one_at_a_time")
@limits_concurrency(to=1, key=lambda account_id: account_id)
def one_at_a_time(account_id: object) -> None:
    PERFORMED.append(("batch_test.one_at_a_time", account_id))


@solidq.job(name="batch_test.only_one")
@limits_concurrency(to=1, key=lambda account_id: account_id, on_conflict="discard")
def only_one(account_id: object) -> None:
    PERFORMED.append(("batch_test.only_one", account_id))


@solidq.job(name="batch_test.once_a_minute")
@limits_rate(to=1, per=60, key="api")
def once_a_minute(value: object) -> None:
    PERFORMED.append(("batch_test.once_a_minute", value))


@solidq.job(name="batch_test.publish")
@coalesce(key="catalog")
def publish(batch: t.Any) -> None:
    """A coalesced callback: its key is the one it has outside any batch."""
    PERFORMED.append(("batch_test.publish", batch.id))


def takes_no_batch() -> None:
    """A function that isn't a job."""


@solidq.job(name="batch_test.recorded_callback")
def recorded_callback(batch: t.Any, kind: str) -> None:
    """A callback run by a worker process: a row in ``solidq_test_runs`` per run."""
    from tests.jobs import worker

    counts = [batch.total_jobs, batch.completed_jobs, batch.failed_jobs, batch.pending_jobs]
    worker.record_run(
        "batch_test.recorded_callback", f"{batch.id}:{kind}", data=[batch.status.value, *counts]
    )


@solidq.job(name="batch_test.adds_two_to_one_slot")
def adds_two_to_one_slot(account_id: object) -> None:
    """Adds two jobs of one concurrency key with ``on_conflict="discard"`` to its own batch:
    the second is discarded at its own enqueue, inside the block."""
    PERFORMED.append(("batch_test.adds_two_to_one_slot", account_id))
    batch = current_job.batch
    assert batch is not None
    with batch.enqueue():
        only_one.perform_later(account_id)
        only_one.perform_later(account_id)


@solidq.job(name="batch_test.adds_on_its_retry")
def adds_on_its_retry(value: object) -> None:
    """Fails on its first run; run again, adds a job to its own batch."""
    runs = [ran for name, ran in PERFORMED if name == "batch_test.adds_on_its_retry"]
    PERFORMED.append(("batch_test.adds_on_its_retry", value))
    if not runs:
        raise Boom(f"failing {value}")
    batch = current_job.batch
    assert batch is not None
    with batch.enqueue():
        work.perform_later(value)


@solidq.job(name="batch_test.opens_child")
def opens_child(values: list[object], failing: list[object], depth: int = 1) -> None:
    """Opens a child of its own batch while it runs: ``work`` for each of ``values``,
    ``fail`` for each of ``failing``, and (``depth`` > 1) another ``opens_child`` a level
    down. The child's callbacks note ``child-<depth>``."""
    PERFORMED.append(("batch_test.opens_child", depth))
    label = f"child-{depth}"
    with solidq.batch(
        on_finish=callback.new(f"{label}-end"),
        on_failure=callback.new(f"{label}-failure"),
        depth=depth,
    ):
        for value in values:
            work.perform_later(value)
        for value in failing:
            fail.perform_later(value)
        if depth > 1:
            opens_child.perform_later([], [], depth - 1)


@solidq.job(name="batch_test.replace")
@coalesce(key=lambda product_id, price: product_id, on_conflict="replace")
def replace(product_id: object, price: object) -> None:
    PERFORMED.append(("batch_test.replace", (product_id, price)))


@solidq.job(name="batch_test.blank_key")
@coalesce(key="")
def blank_key(value: object) -> None:
    PERFORMED.append(("batch_test.blank_key", value))
