"""Jobs for the stacked and weighted rate-limit process tests
(:mod:`tests.controls.rate_limit.test_rate_limit_stacked_processes`), run by real `flask solidq
work` processes on :mod:`tests.apps.rate_limit_app`.

Each run records itself in ``solidq_test_rate_runs`` through
:func:`tests.jobs.rate_limit_process.record_run`: its admission (its claim row's
``created_at``, the moment every budget of the claim was charged) and its start. A weighted
job records its units as the run's ``value``, so the tests add them up per window.

Every name starts with ``stacked_process_test.`` (job names are process-wide).
"""

from __future__ import annotations

from flask_solidq import limits_rate
from tests.jobs.rate_limit_process import Limit
from tests.jobs.rate_limit_process import record_run
from tests.support import solidq

#: The per-second limit of :func:`stacked`: 2 at once, then one every 1/3 s.
PER_SECOND = Limit(to=4, per=1.0, burst=2)
#: Its "per minute" limit, scaled down so the test stays short: 5 at once, then one every
#: 0.75 s, 8 in any 3 s. It binds once the per-second limit has let its burst through, so a
#: backlog meets one limit, then the other.
PER_MINUTE = Limit(to=8, per=3.0, burst=5)


@solidq.job(name="stacked_process_test.stacked")
@limits_rate(to=PER_SECOND.to, per=PER_SECOND.per, burst=PER_SECOND.burst, key="global")
@limits_rate(
    to=PER_MINUTE.to, per=PER_MINUTE.per, burst=PER_MINUTE.burst, key="global", name="minute"
)
def stacked(value: object) -> None:
    """Charges ``.../global`` and ``.../minute/global`` at the same moment."""
    record_run("stacked_process_test.stacked", value)


#: The weighted job's limit, in units: 4 at once, then one unit every 2/9 s, 12 in any 2 s.
UNITS = Limit(to=12, per=2.0, burst=4)


@solidq.job(name="stacked_process_test.weighted")
@limits_rate(
    to=UNITS.to,
    per=UNITS.per,
    burst=UNITS.burst,
    key="global",
    cost=lambda units, _value: units,
)
def weighted(units: int, value: object) -> None:
    """Charges ``units`` (1 to the burst); records them as its run's value."""
    record_run("stacked_process_test.weighted", units)
