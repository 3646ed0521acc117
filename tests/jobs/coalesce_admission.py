"""Jobs for the tests of coalescing admission, what an enqueue does with a coalesced call
(:mod:`tests.controls.coalesce.test_coalesce_admission`). Each notes what it ran in
:data:`PERFORMED`.

Every name starts with ``coalesce_admission_test.`` (job names are process-wide).
"""

from __future__ import annotations

import typing as t

from flask_solidq import coalesce
from flask_solidq import current_job
from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from tests.support import solidq

PREFIX = "coalesce_admission_test."

#: (job name, what it ran) of every job performed in this process.
PERFORMED: list[tuple[str, t.Any]] = []

#: What the worker's instance reported inside perform: (coalesce_status, provider_job_id).
SEEN_BY_WORKER: list[tuple[t.Any, t.Any]] = []


def _first(value: object, *_args: object, **_kwargs: object) -> object:
    return value


def _raising(value: object, *_args: object, **_kwargs: object) -> object:
    if value == "boom":
        raise LookupError("the key callable failed")
    return value


def _region(*_args: object, region: str = "eu", **_kwargs: object) -> str:
    return region


# -- the three modes ---------------------------------------------------------------------------


@solidq.job(name=PREFIX + "discard", queue="first", priority=1)
@coalesce(key=_first)
def discard(item: object, note: object = None) -> None:
    PERFORMED.append((PREFIX + "discard", (item, note)))


@solidq.job(name=PREFIX + "replace", queue="first", priority=1)
@coalesce(key=_first, on_conflict="replace")
@limits_concurrency(to=5, key=_region, duration=60)
@limits_rate(to=100, per=1, key=_region)
def replace(user_id: object, attributes: object = None, *, region: str = "eu") -> None:
    PERFORMED.append((PREFIX + "replace", (user_id, attributes, region)))


@solidq.job(name=PREFIX + "collect")
@coalesce(key=_first, on_conflict="collect")
def collect(calls: list[t.Any]) -> None:
    PERFORMED.append((PREFIX + "collect", [call.args for call in calls]))


@solidq.job(name=PREFIX + "collect_small")
@coalesce(key=_first, on_conflict="collect", max_calls=5)
def collect_small(calls: list[t.Any]) -> None:
    PERFORMED.append((PREFIX + "collect_small", [call.args for call in calls]))


@solidq.job(name=PREFIX + "collect_dispatch")
@coalesce(key=_first, on_conflict="collect", max_calls=3, on_full="dispatch")
def collect_dispatch(calls: list[t.Any]) -> None:
    PERFORMED.append((PREFIX + "collect_dispatch", [call.args for call in calls]))


@solidq.job(name=PREFIX + "collect_wait")
@coalesce(key=_first, on_conflict="collect", max_calls=3, on_full="wait")
def collect_wait(calls: list[t.Any]) -> None:
    PERFORMED.append((PREFIX + "collect_wait", [call.args for call in calls]))


@solidq.job(name=PREFIX + "collect_raising_key")
@coalesce(key=_raising, on_conflict="collect")
def collect_raising_key(calls: list[t.Any]) -> None:
    PERFORMED.append((PREFIX + "collect_raising_key", [call.args for call in calls]))


@solidq.job(name=PREFIX + "plain")
def plain(item: object = None) -> None:
    PERFORMED.append((PREFIX + "plain", (item,)))


# -- key forms ---------------------------------------------------------------------------------


@solidq.job(name=PREFIX + "key_global")
@coalesce(key="global")
def key_global(item: object = None) -> None:
    PERFORMED.append((PREFIX + "key_global", (item,)))


@solidq.job(name=PREFIX + "key_value")
@coalesce(key=_first)
def key_value(item: object = None) -> None:
    PERFORMED.append((PREFIX + "key_value", (item,)))


@solidq.job(name=PREFIX + "key_parts")
@coalesce(key=lambda *parts: list(parts))
def key_parts(*parts: object) -> None:
    PERFORMED.append((PREFIX + "key_parts", parts))


@solidq.job(name=PREFIX + "key_none_result")
@coalesce(key=lambda *_args: None)
def key_none_result(item: object = None) -> None:
    PERFORMED.append((PREFIX + "key_none_result", (item,)))


@solidq.job(name=PREFIX + "key_declared_none")
@coalesce(key=None)
def key_declared_none(item: object = None) -> None:
    PERFORMED.append((PREFIX + "key_declared_none", (item,)))


@solidq.job(name=PREFIX + "key_declared_false")
@coalesce(key=False)
def key_declared_false(item: object = None) -> None:
    PERFORMED.append((PREFIX + "key_declared_false", (item,)))


@solidq.job(name=PREFIX + "key_blank")
@coalesce(key="")
def key_blank(item: object = None) -> None:
    PERFORMED.append((PREFIX + "key_blank", (item,)))


@solidq.job(name=PREFIX + "key_empty_list")
@coalesce(key=[])
def key_empty_list(item: object = None) -> None:
    PERFORMED.append((PREFIX + "key_empty_list", (item,)))


@solidq.job(name=PREFIX + "same_key_one")
@coalesce(key="shared")
def same_key_one() -> None:
    PERFORMED.append((PREFIX + "same_key_one", ()))


@solidq.job(name=PREFIX + "same_key_two")
@coalesce(key="shared")
def same_key_two() -> None:
    PERFORMED.append((PREFIX + "same_key_two", ()))


@solidq.job(name=PREFIX + "key_long")
@coalesce(key=lambda length: "x" * length)
def key_long(length: int) -> None:
    PERFORMED.append((PREFIX + "key_long", (length,)))


# -- outcomes ----------------------------------------------------------------------------------


@solidq.job(name=PREFIX + "discard_limited")
@coalesce(key=_first)
@limits_concurrency(to=1, key="global", duration=60, on_conflict="discard")
def discard_limited(item: object = None) -> None:
    PERFORMED.append((PREFIX + "discard_limited", (item,)))


@solidq.job(name=PREFIX + "reports_status")
@coalesce(key="global")
def reports_status() -> None:
    SEEN_BY_WORKER.append((current_job.coalesce_status, current_job.provider_job_id))


# -- recurring ---------------------------------------------------------------------------------


@solidq.job(name=PREFIX + "recurring_discard")
@coalesce(key="global")
def recurring_discard() -> None:
    PERFORMED.append((PREFIX + "recurring_discard", ()))


@solidq.job(name=PREFIX + "recurring_collect")
@coalesce(key="global", on_conflict="collect")
def recurring_collect(calls: list[t.Any]) -> None:
    PERFORMED.append((PREFIX + "recurring_collect", [call.args for call in calls]))
