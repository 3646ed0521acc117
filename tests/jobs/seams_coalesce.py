"""Jobs for the seams where coalescing meets concurrency limits, deploys, transactions and
failures (:mod:`tests.controls.coalesce.test_seams_coalesce`), claimed and performed by the tests
in-process. Each notes what it ran in :data:`PERFORMED`.

Every name starts with ``seams_coalesce_test.`` (job names are process-wide).
"""

from __future__ import annotations

import typing as t

from flask_solidq import coalesce
from flask_solidq import current_job
from flask_solidq import limits_concurrency
from flask_solidq import retry_on
from tests.support import solidq

#: (job name, what it ran) of every job performed in this process: the arguments, or for a
#: collecting job the list of its calls as ``(id, args)``.
PERFORMED: list[tuple[str, t.Any]] = []

P = "seams_coalesce_test."


class Flaky(Exception):
    """Raised by the first run of a job that retries."""


def _note(name: str, *args: t.Any) -> None:
    """Record a run: a collecting job is handed its calls, any other job its arguments (a
    deploy can switch one into the other, so each job here takes both shapes)."""
    if len(args) == 1 and isinstance(args[0], list):
        PERFORMED.append((name, [(call.id, call.args) for call in args[0]]))
    else:
        PERFORMED.append((name, args))


@solidq.job(name=f"{P}limited")
@limits_concurrency(key="only", to=1, duration=600)
def limited(note: object = None) -> None:
    """Limited to one at a time; a test removes the limit as a deploy would."""
    _note(f"{P}limited", note)


@solidq.job(name=f"{P}collect")
@coalesce(key=lambda account, *_: account, on_conflict="collect", max_calls=2)
def collect(*args: t.Any) -> None:
    """Collects; a test switches its declaration (``on_conflict``, ``on_full``, the key)."""
    _note(f"{P}collect", *args)


@solidq.job(name=f"{P}dedupe")
@coalesce(key=lambda account, *_: account)
def dedupe(*args: t.Any) -> None:
    """Discards; a test switches it to replace or collect."""
    _note(f"{P}dedupe", *args)


@solidq.job(name=f"{P}replace")
@coalesce(key=lambda account, *_: account, on_conflict="replace")
def replace(*args: t.Any) -> None:
    """Replaces; a test switches it to discard."""
    _note(f"{P}replace", *args)


@solidq.job(name=f"{P}debounced")
@coalesce(key=lambda account, *_: account, debounce=30, max_wait=40)
def debounced(*args: t.Any) -> None:
    _note(f"{P}debounced", *args)


@solidq.job(name=f"{P}collect_one_at_a_time")
@coalesce(key=lambda account, *_: account, on_conflict="collect")
@limits_concurrency(key=lambda account, *_: account, to=1, duration=600)
def collect_one_at_a_time(calls: list[t.Any]) -> None:
    """Seed 003's recipe "Run one collecting job at a time"."""
    _note(f"{P}collect_one_at_a_time", calls)


@solidq.job(name=f"{P}collect_dispatch_limited")
@coalesce(key=lambda account, *_: account, on_conflict="collect", max_calls=2, on_full="dispatch")
@limits_concurrency(key=lambda account, *_: account, to=1, duration=600)
def collect_dispatch_limited(calls: list[t.Any]) -> None:
    """Collects until 2 calls or its wait, one run at a time per account."""
    _note(f"{P}collect_dispatch_limited", calls)


@solidq.job(name=f"{P}collect_dispatch")
@coalesce(key=lambda account, *_: account, on_conflict="collect", max_calls=2, on_full="dispatch")
def collect_dispatch(calls: list[t.Any]) -> None:
    _note(f"{P}collect_dispatch", calls)


@solidq.job(name=f"{P}collect_retried")
@coalesce(key=lambda account, *_: account, on_conflict="collect")
@retry_on(Flaky, wait=0, attempts=2)
def collect_retried(calls: list[t.Any]) -> None:
    """Raises :class:`Flaky` on its first run; the retry succeeds."""
    _note(f"{P}collect_retried", calls)
    if current_job.executions == 1:
        raise Flaky("first run")


@solidq.job(name=f"{P}collect_failing")
@coalesce(key=lambda account, *_: account, on_conflict="collect")
def collect_failing(calls: list[t.Any]) -> None:
    _note(f"{P}collect_failing", calls)
    raise ValueError("failing on purpose")
