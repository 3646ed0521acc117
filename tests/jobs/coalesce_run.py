"""Jobs for the tests of what a coalesced job does when it runs
(:mod:`tests.controls.coalesce.test_coalesce_runs`), claimed and performed by the tests in-process.
Each notes what it ran in :data:`PERFORMED`.

Every name starts with ``coalesce_run_test.`` (job names are process-wide).
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa
from sqlalchemy import orm

from flask_solidq import coalesce
from flask_solidq import current_job
from flask_solidq import discard_on
from flask_solidq import limits_concurrency
from flask_solidq import retry_on
from tests.support import solidq

#: (job name, what it ran) of every job performed in this process: the arguments, or for a
#: collecting job the list of its calls as ``(id, args, kwargs)``.
PERFORMED: list[tuple[str, t.Any]] = []

#: The ``Call`` lists collecting jobs received, as they received them.
CALLS: list[list[t.Any]] = []

#: What a running job saw of itself: ``(current_job.coalesced_calls, current_job.arguments)``.
SEEN: list[tuple[t.Any, t.Any]] = []

#: The calls a running job made of its own key (the returned job instances).
INNER: list[t.Any] = []


class Flaky(Exception):
    """Raised by the first run of a job that retries."""


class Base(orm.DeclarativeBase):
    pass


class Product(Base):
    """A model of the app, passed to jobs as an argument (stored by reference)."""

    __tablename__ = "coalesce_run_test_products"

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(50))


def _note_calls(name: str, calls: list[t.Any]) -> None:
    CALLS.append(list(calls))
    SEEN.append((current_job.coalesced_calls, current_job.arguments))
    PERFORMED.append((name, [(call.id, call.args, call.kwargs) for call in calls]))


@solidq.job(name="coalesce_run_test.dedupe")
@coalesce(key=lambda key, *_, **__: key)
def dedupe(key: object, note: object = None) -> None:
    """Discard; with ``note="reenter"`` it calls itself with its own key while it runs."""
    PERFORMED.append(("coalesce_run_test.dedupe", (key, note)))
    if note == "reenter":
        INNER.append(dedupe.perform_later(key, "inner"))


@solidq.job(name="coalesce_run_test.replace")
@coalesce(key=lambda key, *_, **__: key, on_conflict="replace")
def replace(key: object, value: object = None) -> None:
    PERFORMED.append(("coalesce_run_test.replace", (key, value)))


@solidq.job(name="coalesce_run_test.collect")
@coalesce(key=lambda account, *_, **__: account, on_conflict="collect")
def collect(calls: list[t.Any]) -> None:
    _note_calls("coalesce_run_test.collect", calls)


@coalesce(key=lambda account, *_, **__: account, on_conflict="collect")
class CollectCalls(solidq.Job, name="coalesce_run_test.collect_class"):
    """The class form: ``perform_calls(self, calls)``; its ``perform`` is never run."""

    def perform(self, *args: t.Any, **kwargs: t.Any) -> None:
        PERFORMED.append(("coalesce_run_test.collect_class.perform", args))

    def perform_calls(self, calls: list[t.Any]) -> None:
        _note_calls("coalesce_run_test.collect_class", calls)


@coalesce(key=lambda account, *_, **__: account, on_conflict="collect")
class CollectWithoutPerformCalls(solidq.Job, name="coalesce_run_test.collect_no_perform_calls"):
    """Collects, but defines only ``perform``: its runs fail with NotImplementedError."""

    def perform(self, *args: t.Any, **kwargs: t.Any) -> None:
        PERFORMED.append(("coalesce_run_test.collect_no_perform_calls.perform", args))


@solidq.job(name="coalesce_run_test.collect_products")
@coalesce(key="all", on_conflict="collect")
def collect_products(calls: list[t.Any]) -> None:
    """Collects calls whose argument is a :class:`Product`."""
    CALLS.append(list(calls))
    PERFORMED.append(
        ("coalesce_run_test.collect_products", [(call.id, call.args[0].id) for call in calls])
    )


@solidq.job(name="coalesce_run_test.collect_retried")
@coalesce(key=lambda account, *_, **__: account, on_conflict="collect")
@retry_on(Flaky, wait=0, attempts=2)
def collect_retried(calls: list[t.Any]) -> None:
    """Raises :class:`Flaky` on its first run; the retry succeeds."""
    _note_calls("coalesce_run_test.collect_retried", calls)
    if current_job.executions == 1:
        raise Flaky("first run")


@solidq.job(name="coalesce_run_test.collect_failing")
@coalesce(key=lambda account, *_, **__: account, on_conflict="collect")
def collect_failing(calls: list[t.Any]) -> None:
    _note_calls("coalesce_run_test.collect_failing", calls)
    raise ValueError("failing on purpose")


@solidq.job(name="coalesce_run_test.collect_limited")
@coalesce(key=lambda account, *_, **__: account, on_conflict="collect")
@limits_concurrency(to=1, key="global", duration=600)
def collect_limited(calls: list[t.Any]) -> None:
    _note_calls("coalesce_run_test.collect_limited", calls)


# Definitions a stored job is switched to, to simulate a deploy that changed its declaration.


@solidq.job(name="coalesce_run_test.plain_target")
@discard_on(Exception)
def plain_target(*args: t.Any, **kwargs: t.Any) -> None:
    """No coalesce any more; discards on any exception."""
    PERFORMED.append(("coalesce_run_test.plain_target", args))


@solidq.job(name="coalesce_run_test.discard_target")
@coalesce(key=lambda account, *_, **__: account)
@retry_on(Exception, wait=0, attempts=3)
def discard_target(*args: t.Any, **kwargs: t.Any) -> None:
    """coalesce on_conflict="discard"; retries on any exception."""
    PERFORMED.append(("coalesce_run_test.discard_target", args))


@solidq.job(name="coalesce_run_test.replace_target")
@coalesce(key=lambda account, *_, **__: account, on_conflict="replace")
@discard_on(Exception)
def replace_target(*args: t.Any, **kwargs: t.Any) -> None:
    """coalesce on_conflict="replace"; discards on any exception."""
    PERFORMED.append(("coalesce_run_test.replace_target", args))


@solidq.job(name="coalesce_run_test.collect_pairs")
@coalesce(key=lambda account, *_, **__: account, on_conflict="collect", max_calls=2)
def collect_pairs(calls: list[t.Any]) -> None:
    """Collects two calls a job: the second seals it."""
    _note_calls("coalesce_run_test.collect_pairs", calls)


@solidq.job(name="coalesce_run_test.collect_products_retried")
@coalesce(key="all", on_conflict="collect")
@retry_on(Flaky, wait=0, attempts=2)
def collect_products_retried(calls: list[t.Any]) -> None:
    """Like :func:`collect_products`; raises :class:`Flaky` on its first run."""
    PERFORMED.append(
        (
            "coalesce_run_test.collect_products_retried",
            [(call.id, call.args[0].id) for call in calls],
        )
    )
    if current_job.executions == 1:
        raise Flaky("first run")


@solidq.job(name="coalesce_run_test.replace_retried")
@coalesce(key=lambda key, *_, **__: key, on_conflict="replace")
@retry_on(Flaky, wait=0, attempts=2)
def replace_retried(key: object, value: object = None) -> None:
    """Replace; raises :class:`Flaky` on its first run."""
    PERFORMED.append(("coalesce_run_test.replace_retried", (key, value)))
    if current_job.executions == 1:
        raise Flaky("first run")
