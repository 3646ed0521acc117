"""The rate limit (``limits_rate``): workers claim no more of a budget's jobs in any ``per``
than ``to``, checked inside the claim transaction.

What it holds: the declaration (:mod:`.declaration`), the claim and start hooks
(:mod:`.control`), the GCRA arithmetic (:mod:`.gcra`), the budget rows (:mod:`.budgets`,
:mod:`.admission_ring`, :mod:`.budget_table`), each job's charges (:mod:`.rate_charges`,
:mod:`.rate_usage`), back-offs (:mod:`.back_off`, :mod:`.local_pauses`), named budgets and
admissions taken outside jobs (:mod:`.named_budgets`, :mod:`.admissions`,
:mod:`.budget_lookup`, :mod:`.available`).
"""

from __future__ import annotations

from flask_solidq.controls.rate_limit.control import CONTROL as CONTROL
from flask_solidq.controls.rate_limit.control import declaration_for as declaration_for
from flask_solidq.controls.rate_limit.declaration import limits_rate as limits_rate
from flask_solidq.controls.rate_limit.declaration import named_budget as named_budget
from flask_solidq.definitions.rate_limits import RateLimit as RateLimit
