"""Named budgets (``rate_limiter.register``), the jobs that charge them
(``limits_rate(budget=)``), jobs asked about by job (``rate_limiter.is_limited(job, *args)``)
and limits without ``key=``, for :mod:`tests.controls.rate_limit.test_rate_limiter_by_job` and
:mod:`tests.controls.rate_limit.test_rate_limit_acquire`. The jobs do nothing: the tests claim them.

Every name starts with ``nb_test`` (job and budget names are process-wide). The budgets are
registered here, at import, before the jobs that name them, as an app would.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from flask_solidq import limits_rate
from flask_solidq.models.base import UTCDateTime
from tests.support import solidq

#: One admission a minute: a second one in a test is always refused.
MINUTELY = solidq.rate_limiter.register("nb_test.minutely", to=1, per=60)
#: Two a second, one at a time: admissions half a second apart.
HALF_SECOND = solidq.rate_limiter.register("nb_test.half_second", to=2, per=1)
#: One a second: a caller refused waits about a second.
SECONDLY = solidq.rate_limiter.register("nb_test.secondly", to=1, per=1)
#: Shared by :func:`charge` and :func:`refund`, and taken by the tests with ``acquire``.
SHARED = solidq.rate_limiter.register("nb_test.shared", to=1, per=60)
#: A daily budget :func:`charge_daily` stacks on :data:`SHARED`.
DAILY = solidq.rate_limiter.register("nb_test.daily", to=1, per=dt.timedelta(days=1))

#: Taken from two processes at once (:mod:`tests.scripts.acquire_many`): five in any second,
#: two at once, then one every quarter second.
PROCESSES = solidq.rate_limiter.register("nb_test.processes", to=5, per=1, burst=2)

#: Where :mod:`tests.scripts.acquire_many` notes each admission it took: the moment charged
#: (the database's clock) and when its block started (its host's clock), in which process.
ACQUISITIONS = sa.Table(
    "solidq_test_acquisitions",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("admitted_at", UTCDateTime(), nullable=False),
    sa.Column("started_at", UTCDateTime(), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
)

#: The group :func:`grouped_default` charges the bare budget of.
GROUP = "nb_test.Group"


@solidq.job(name="nb_test.charge")
@limits_rate(budget=SHARED)
def charge(account: str) -> None:
    """Charges the registered budget ``nb_test.shared``, whatever the account."""


@solidq.job(name="nb_test.refund")
@limits_rate(budget=SHARED)
def refund(account: str) -> None:
    """Shares ``nb_test.shared`` with :func:`charge`."""


@solidq.job(name="nb_test.charge_daily")
@limits_rate(budget=SHARED)
@limits_rate(budget=DAILY, name="daily")
def charge_daily(account: str) -> None:
    """Charges two registered budgets at once: ``nb_test.shared`` and ``nb_test.daily``."""


@solidq.job(name="nb_test.fullburst")
@limits_rate(to=1, per=60, key="global")
def fullburst() -> None:
    """The issue's job: its budget is ``nb_test.fullburst/global``, not its bare name."""


@solidq.job(name="nb_test.per_account")
@limits_rate(to=1, per=60, key=lambda account: account)
def per_account(account: str) -> None:
    """A budget per account: ``nb_test.per_account/<account>``."""


@solidq.job(name="nb_test.stacked")
@limits_rate(to=10, per=1, burst=10, key=lambda shop: shop)
@limits_rate(to=1, per=dt.timedelta(days=1), key=lambda shop: shop, name="daily")
def stacked(shop: str) -> None:
    """Ten a second (``nb_test.stacked/<shop>``) and one a day
    (``nb_test.stacked/daily/<shop>``) for each shop."""


@solidq.job(name="nb_test.bare_default")
@limits_rate(to=1, per=60)
def bare_default(note: object = None) -> None:
    """No ``key=``: the job's bare budget, ``nb_test.bare_default``."""


@solidq.job(name="nb_test.grouped_default")
@limits_rate(to=1, per=60, group=GROUP)
def grouped_default(note: object = None) -> None:
    """No ``key=``, a group: the group's bare budget, ``nb_test.Group``."""


@solidq.job(name="nb_test.blank_default")
@limits_rate(to=1, per=60, group=lambda *_: None)
def blank_default(note: object = None) -> None:
    """No ``key=``, a group callable that returns None: the key is blank, the job unlimited."""


@solidq.job(name="nb_test.unlimited")
def unlimited() -> None:
    """No rate limit at all."""


@limits_rate(to=1, per=60, key=lambda account: account)
class AccountCharge(solidq.Job, name="nb_test.account_charge"):
    """The class form, under a per-account limit (``nb_test.account_charge/<account>``)."""

    def perform(self, account: str) -> None:
        pass
