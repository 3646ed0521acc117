"""The rate-limit app with the waits of a missing budgets table scaled down from minutes to
seconds: ``flask --app tests.apps.budget_table_app``, for the process test that migrates the
table back under running workers and watches the reminders (the real waits are a minute and
five: see :mod:`flask_solidq.controls.rate_limit.budget_table`).

Environment: as :mod:`tests.apps.rate_limit_app`.
"""

from __future__ import annotations

import datetime as dt

from flask import Flask

from flask_solidq.controls.rate_limit import budget_table
from tests.apps import rate_limit_app

#: How long a limited job waits while the table is missing.
WAIT = 1.0
#: How often a process looks for the table again.
RECHECK = 1.0
#: How often a process says the table is still missing.
REMINDER = 3.0


def create_app() -> Flask:
    """The rate-limit app; the waits are scaled here, not at import (the tests import the
    numbers above), before `flask solidq work` forks its processes."""
    budget_table.TABLE_MISSING_WAIT = dt.timedelta(seconds=WAIT)
    budget_table.RECHECK_INTERVAL = RECHECK
    budget_table.REMINDER_INTERVAL = REMINDER
    return rate_limit_app.create_app()
