"""Jobs for the coalescing tests (``coalesce``), claimed and performed by the tests directly
(:mod:`tests.controls.coalesce.test_coalesce`) or by real workers. Each notes what it ran in
:data:`PERFORMED`.

Every name starts with ``coalesce_test.`` (job names are process-wide).
"""

from __future__ import annotations

import typing as t

from flask_solidq import coalesce
from flask_solidq import limits_concurrency
from tests.support import solidq

#: (job name, what it ran) of every job performed in this process: the arguments, or for a
#: collecting job the list of its calls' (id, args, kwargs).
PERFORMED: list[tuple[str, t.Any]] = []


@solidq.job(name="coalesce_test.dedupe")
@coalesce(key=lambda product_id, *_: product_id)
def dedupe(product_id: object, note: object = None) -> None:
    PERFORMED.append(("coalesce_test.dedupe", (product_id, note)))


@solidq.job(name="coalesce_test.replace")
@coalesce(key=lambda user_id, *_: user_id, on_conflict="replace")
def replace(user_id: object, attributes: object = None) -> None:
    PERFORMED.append(("coalesce_test.replace", (user_id, attributes)))


@solidq.job(name="coalesce_test.collect")
@coalesce(key=lambda account_id, *_: account_id, on_conflict="collect", max_calls=3)
def collect(calls: list[t.Any]) -> None:
    PERFORMED.append(
        ("coalesce_test.collect", [(call.id, call.args, call.kwargs) for call in calls])
    )


@solidq.job(name="coalesce_test.collect_dispatch")
@coalesce(key="all", on_conflict="collect", max_calls=2, on_full="dispatch")
def collect_dispatch(calls: list[t.Any]) -> None:
    PERFORMED.append(("coalesce_test.collect_dispatch", [call.args for call in calls]))


@solidq.job(name="coalesce_test.debounced")
@coalesce(key="all", debounce=30, max_wait=40)
def debounced(note: object = None) -> None:
    PERFORMED.append(("coalesce_test.debounced", (note,)))


@solidq.job(name="coalesce_test.leading_edge")
@coalesce(key="global")
@limits_concurrency(to=1, key="global", duration=60)
def leading_edge(note: object = None) -> None:
    PERFORMED.append(("coalesce_test.leading_edge", (note,)))
