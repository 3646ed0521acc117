"""Jobs for the tests where the controls meet each other, retries and manual actions
(:mod:`tests.controls.test_controls_meet`), claimed and performed by the tests directly.

Every name starts with ``meet_test.`` (job names are process-wide).
"""

from __future__ import annotations

from flask_solidq import coalesce
from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from flask_solidq import retry_on
from tests.support import solidq


class Flaky(Exception):
    """Retried by :func:`dedupe_discard`'s rule, after a wait."""


@solidq.job(name="meet_test.dedupe_discard")
@coalesce(key=lambda key, *_, **__: key)
@limits_concurrency(key="shared", to=1, duration=120, on_conflict="discard")
@retry_on(Flaky, wait=60, attempts=3)
def dedupe_discard(key: str, fail: str | None = None) -> None:
    """A coalesced job whose concurrency limit discards: ``fail`` makes a run raise
    :class:`Flaky` (retried after a wait) or a plain error (failed)."""
    if fail == "flaky":
        raise Flaky(key)
    if fail == "boom":
        raise RuntimeError(key)


@solidq.job(name="meet_test.plain_discard")
@limits_concurrency(key="shared-plain", to=1, duration=120, on_conflict="discard")
def plain_discard(key: str, fail: bool = False) -> None:
    """The same limit without coalescing: Solid Queue's rules, a retry that conflicts is
    discarded."""
    if fail:
        raise RuntimeError(key)


@solidq.job(name="meet_test.late_keys")
@limits_rate(to=5, per=60, key=lambda account, *_, **__: account)
@limits_concurrency(key=lambda account, *_, **__: account, to=1, duration=120)
def late_keys(account: str, fail: bool = False) -> None:
    """Limited by rate and concurrency per account; the tests wipe the keys of a stored
    one to stand for a job enqueued before a deploy declared the limits."""
    if fail:
        raise RuntimeError(account)
