"""Jobs under stacked rate limits (``limits_rate(name=)``) and limits counted in units
(``limits_rate(cost=)``), claimed by :mod:`tests.controls.rate_limit.test_rate_limit_stacked`
directly.

Every name starts with ``stacked_test.`` (job names are process-wide).
"""

from __future__ import annotations

import datetime as dt
import typing as t

from flask_solidq import current_job
from flask_solidq import limits_rate
from tests.support import solidq

#: What :func:`tokens` reports it used, by its ``note``: a test sets it before the run.
USED: dict[str, int] = {}

#: The group :func:`sync_shop` and :func:`refund_shop` share their budgets through.
SHOP = "stacked_test.Shop"


@solidq.job(name="stacked_test.minutely_hourly")
@limits_rate(to=1, per=60, key="global")
@limits_rate(to=5, per=dt.timedelta(hours=1), burst=5, key="global", name="hourly")
def minutely_hourly(note: object = None) -> None:
    """One a minute (its main budget) and five an hour (``.../hourly/global``)."""


@solidq.job(name="stacked_test.hourly_tight")
@limits_rate(to=10, per=1, burst=10, key="global")
@limits_rate(to=1, per=dt.timedelta(hours=1), key="global", name="hourly")
def hourly_tight(note: object = None) -> None:
    """Ten a second, but only one an hour: the named budget refuses first."""


@solidq.job(name="stacked_test.sync_shop")
@limits_rate(to=2, per=1, burst=2, key=lambda shop: shop, group=SHOP)
@limits_rate(
    to=3, per=dt.timedelta(days=1), burst=3, key=lambda shop: shop, group=SHOP, name="daily"
)
def sync_shop(shop: str) -> None:
    """Shares both of a shop's budgets with :func:`refund_shop`."""


@solidq.job(name="stacked_test.refund_shop")
@limits_rate(to=2, per=1, burst=2, key=lambda shop: shop, group=SHOP)
@limits_rate(
    to=3, per=dt.timedelta(days=1), burst=3, key=lambda shop: shop, group=SHOP, name="daily"
)
def refund_shop(shop: str) -> None:
    """See :func:`sync_shop`."""


@solidq.job(name="stacked_test.tokens")
@limits_rate(to=100, per=60, burst=100, key="openai", cost=lambda units, note="": units)
def tokens(units: int, note: str = "") -> None:
    """Charges ``units`` of 100 a minute; reports :data:`USED` ``[note]`` when it is set."""
    if note in USED:
        current_job.rate_limit_used(USED[note])


@solidq.job(name="stacked_test.points_and_calls")
@limits_rate(to=4, per=60, burst=4, key="shop")
@limits_rate(to=50, per=60, burst=50, key="shop", name="points", cost=lambda points: points)
def points_and_calls(points: int) -> None:
    """Four calls a minute and 50 points a minute (each at once, then one a minute): a call
    charges 1 and ``points``, then reports :data:`USED` ``["points"]`` when set."""
    current_job.rate_limit_used(t.cast(int, USED.get("points", points)))
