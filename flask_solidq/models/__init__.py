"""The flask-solidq tables, as SQLAlchemy models (API.md section 7).

Every table's name starts with ``solidq_``. The hot paths (enqueue, claim, dispatch, finish)
use the tables through SQLAlchemy Core (``JobRecord.__table__``); the models serve the
dashboard, the CLI and your own queries.
"""

from flask_solidq.models.base import Base as Base
from flask_solidq.models.base import metadata as metadata
from flask_solidq.models.batches import BatchRecord as BatchRecord
from flask_solidq.models.coalescing import CoalescedCall as CoalescedCall
from flask_solidq.models.coalescing import CoalesceKey as CoalesceKey
from flask_solidq.models.executions import BlockedExecution as BlockedExecution
from flask_solidq.models.executions import ClaimedExecution as ClaimedExecution
from flask_solidq.models.executions import FailedExecution as FailedExecution
from flask_solidq.models.executions import ReadyExecution as ReadyExecution
from flask_solidq.models.executions import ScheduledExecution as ScheduledExecution
from flask_solidq.models.failures import JobFailure as JobFailure
from flask_solidq.models.job_record import JobRecord as JobRecord
from flask_solidq.models.job_stats import JobStatsBucket as JobStatsBucket
from flask_solidq.models.pauses import Pause as Pause
from flask_solidq.models.processes import ProcessRecord as ProcessRecord
from flask_solidq.models.rate_limits import RateLimitBudget as RateLimitBudget
from flask_solidq.models.recurring import RecurringExecution as RecurringExecution
from flask_solidq.models.recurring import RecurringTask as RecurringTask
from flask_solidq.models.semaphores import Semaphore as Semaphore

#: The tables, in creation order (every table after the ones it references).
TABLES = tuple(metadata.sorted_tables)
