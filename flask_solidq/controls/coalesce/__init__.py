"""Coalescing (``coalesce``): repeated enqueues with one key share one pending job.

What it holds: the declaration (:mod:`.declaration`), the hooks (:mod:`.control`), how calls
are admitted to a pending job (:mod:`.coalesce_admission`), the collected calls
(:mod:`.coalesce_calls`), what a start does (:mod:`.coalesce_start`) and when a job comes
due (:mod:`.coalesce_timing`).
"""

from __future__ import annotations

from flask_solidq.controls.coalesce.control import CONTROL as CONTROL
from flask_solidq.controls.coalesce.declaration import coalesce as coalesce
from flask_solidq.definitions.coalescing import DEFAULT_MAX_CALLS as DEFAULT_MAX_CALLS
from flask_solidq.definitions.coalescing import Coalesce as Coalesce
from flask_solidq.definitions.coalescing import OnConflict as OnConflict
from flask_solidq.definitions.coalescing import OnFull as OnFull
