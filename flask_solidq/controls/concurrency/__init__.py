"""The concurrency limit (``limits_concurrency``): at most ``to`` jobs of one key run at a time.

What it holds: the declaration (:mod:`.declaration`), the hooks that take and give back a
slot (:mod:`.control`) and the slot rows (:mod:`.semaphores`).
"""

from __future__ import annotations

from flask_solidq.controls.concurrency.control import CONTROL as CONTROL
from flask_solidq.controls.concurrency.control import LEFTOVER as LEFTOVER
from flask_solidq.controls.concurrency.control import limit_of as limit_of
from flask_solidq.controls.concurrency.control import maintain as maintain
from flask_solidq.controls.concurrency.control import slot_terms as slot_terms
from flask_solidq.controls.concurrency.declaration import check_combinations as check_combinations
from flask_solidq.controls.concurrency.declaration import limits_concurrency as limits_concurrency
from flask_solidq.definitions.concurrency_limits import DEFAULT_DURATION as DEFAULT_DURATION
from flask_solidq.definitions.concurrency_limits import ConcurrencyLimit as ConcurrencyLimit
from flask_solidq.definitions.concurrency_limits import OnConflict as OnConflict
