"""Job definitions the tests enqueue and run, named for what they do."""

from __future__ import annotations

import datetime as dt
import enum

from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from tests.support import solidq

RESULTS: list[object] = []


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@solidq.job
def store_result(value: object) -> object:
    RESULTS.append(value)
    return value


@solidq.job(queue="low", priority=5)
def store_pair(first: object, second: object = None) -> tuple[object, object]:
    RESULTS.append((first, second))
    return (first, second)


class StoreResultJob(solidq.Job):
    queue_name = "results"
    priority = 2

    def perform(self, value: object) -> object:
        RESULTS.append(value)
        return value


@solidq.job
@limits_concurrency(key=lambda account_id, *_, **__: account_id, to=1)
@limits_rate(to=10, per=dt.timedelta(minutes=1), key="global", group="Api")
def sync_account(account_id: int, note: str = "") -> int:
    RESULTS.append(account_id)
    return account_id


@solidq.job
@limits_rate(to=5, per=1, key=lambda *_: 1 / 0)
def raising_key(value: object) -> None:
    RESULTS.append(value)
