"""Jobs for the concurrency-control tests (``limits_concurrency``).

The jobs the process tests run leave an interval per run in ``solidq_test_concurrency_runs``,
a table of the tests' own in the queue's database (created by
:func:`tests.support.concurrency.create_runs_table`): which key, in which process, started and
finished when (``time.time()``), so a test can check afterwards which runs of a key overlapped.
The jobs of the database-level tests do nothing but note their call in :data:`PERFORMED`.

Every name starts with ``concurrency_test.`` (job names are process-wide).
"""

from __future__ import annotations

import os
import time
import typing as t

import sqlalchemy as sa
from flask import current_app

from flask_solidq import limits_concurrency
from flask_solidq import retry_on
from flask_solidq.storage import db as solidq_db
from tests.support import solidq

#: The ``duration`` of the database-level jobs, in seconds.
DURATION = 120.0

#: The lease of :func:`short_lease`: its semaphore expires this long after it is taken.
LEASE = 2.0

#: The group two definitions share one semaphore through.
ACCOUNT_WRITES = "concurrency_test.AccountWrites"

RUNS = sa.Table(
    "solidq_test_concurrency_runs",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_name", sa.String(100), nullable=False),
    sa.Column("key", sa.String(100), nullable=False),
    sa.Column("value", sa.String(100)),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started", sa.Double, nullable=False),
    sa.Column("finished", sa.Double),
)

#: (job name, arguments) of every database-level job performed in this process.
PERFORMED: list[tuple[str, tuple[t.Any, ...]]] = []

#: The arguments every call of :func:`counted_key`'s key callable received.
KEY_CALLS: list[tuple[t.Any, ...]] = []


class Flaky(Exception):
    """Raised by :func:`retried`, which retries on it."""


# Jobs the worker processes run: each records its interval.


def _engine() -> sa.Engine:
    return t.cast(sa.Engine, current_app.extensions["solidq"].engine)


def run_interval(job_name: str, key: str, value: object, seconds: float) -> None:
    """Record the start of a run, sleep ``seconds``, record its end."""
    row = {
        "job_name": job_name,
        "key": key,
        "value": str(value),
        "pid": os.getpid(),
        "started": time.time(),
        "finished": None,
    }
    with solidq_db.write(_engine()) as connection:
        run_id = connection.execute(RUNS.insert(), row).inserted_primary_key[0]  # type: ignore[index]
    time.sleep(seconds)
    finished = time.time()
    with solidq_db.write(_engine()) as connection:
        connection.execute(RUNS.update().where(RUNS.c.id == run_id).values(finished=finished))


@solidq.job(name="concurrency_test.serial")
@limits_concurrency(key=lambda key, *_: key, to=1, duration=60)
def serial(key: str, value: object, seconds: float) -> None:
    """One at a time per key."""
    run_interval("concurrency_test.serial", key, value, seconds)


@solidq.job(name="concurrency_test.pair")
@limits_concurrency(key=lambda key, *_: key, to=2, duration=60)
def pair(key: str, value: object, seconds: float) -> None:
    """Two at a time per key."""
    run_interval("concurrency_test.pair", key, value, seconds)


@solidq.job(name="concurrency_test.discarding")
@limits_concurrency(key=lambda key, *_: key, to=1, duration=60, on_conflict="discard")
def discarding(key: str, value: object, seconds: float) -> None:
    """One at a time per key; an enqueue while one runs is dropped."""
    run_interval("concurrency_test.discarding", key, value, seconds)


@solidq.job(name="concurrency_test.short_lease", queue="lease")
@limits_concurrency(key=lambda key, *_: key, to=1, duration=LEASE)
def short_lease(key: str, value: object, seconds: float) -> None:
    """One at a time per key, for :data:`LEASE` seconds at most."""
    run_interval("concurrency_test.short_lease", key, value, seconds)


# Jobs the database-level tests perform in the test process.


@solidq.job(name="concurrency_test.limited")
@limits_concurrency(key=lambda account, *_: account, to=1, duration=DURATION)
def limited(account: str, note: object = None) -> None:
    PERFORMED.append(("concurrency_test.limited", (account, note)))


@solidq.job(name="concurrency_test.limited_two")
@limits_concurrency(key=lambda account, *_: account, to=2, duration=DURATION)
def limited_two(account: str, note: object = None) -> None:
    PERFORMED.append(("concurrency_test.limited_two", (account, note)))


@solidq.job(name="concurrency_test.discarded")
@limits_concurrency(key=lambda account, *_: account, duration=DURATION, on_conflict="discard")
def discarded(account: str, note: object = None) -> None:
    PERFORMED.append(("concurrency_test.discarded", (account, note)))


@solidq.job(name="concurrency_test.failing")
@limits_concurrency(key=lambda account, *_: account, duration=DURATION)
def failing(account: str, note: object = None) -> None:
    PERFORMED.append(("concurrency_test.failing", (account, note)))
    raise ValueError(f"failing on purpose for {account}")


@solidq.job(name="concurrency_test.retried")
@limits_concurrency(key=lambda account, *_: account, duration=DURATION)
@retry_on(Flaky, wait=0, attempts=2)
def retried(account: str, note: object = None) -> None:
    PERFORMED.append(("concurrency_test.retried", (account, note)))
    raise Flaky(f"flaky for {account}")


@solidq.job(name="concurrency_test.retried_or_discarded")
@limits_concurrency(key=lambda account, *_: account, duration=DURATION, on_conflict="discard")
@retry_on(Flaky, wait=0, attempts=2)
def retried_or_discarded(account: str, note: object = None) -> None:
    PERFORMED.append(("concurrency_test.retried_or_discarded", (account, note)))
    raise Flaky(f"flaky for {account}")


def _counting_key(account: str) -> str:
    KEY_CALLS.append((account,))
    return account


@solidq.job(name="concurrency_test.counted_key")
@limits_concurrency(key=_counting_key, duration=DURATION)
def counted_key(account: str) -> None:
    PERFORMED.append(("concurrency_test.counted_key", (account,)))


@solidq.job(name="concurrency_test.import_orders")
@limits_concurrency(key=lambda account_id: account_id, group=ACCOUNT_WRITES, duration=DURATION)
def import_orders(account_id: int) -> None:
    PERFORMED.append(("concurrency_test.import_orders", (account_id,)))


@solidq.job(name="concurrency_test.recalculate_balance")
@limits_concurrency(key=lambda account_id: account_id, group=ACCOUNT_WRITES, duration=DURATION)
def recalculate_balance(account_id: int) -> None:
    PERFORMED.append(("concurrency_test.recalculate_balance", (account_id,)))


@solidq.job(name="concurrency_test.unlimited")
def unlimited(value: object) -> None:
    PERFORMED.append(("concurrency_test.unlimited", (value,)))
