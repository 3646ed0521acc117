"""flask-solidq: a job queue in your Flask app's own SQL database.

Rate limits checked inside the claim transaction, coalescing of repeated enqueues and
concurrency limits, on SQLite, PostgreSQL and MySQL/MariaDB.
"""

from flask_solidq.controls.coalesce import coalesce as coalesce
from flask_solidq.controls.concurrency import limits_concurrency as limits_concurrency
from flask_solidq.controls.rate_limit import limits_rate as limits_rate
from flask_solidq.definitions.arguments import register_serializer as register_serializer
from flask_solidq.definitions.calls import Call as Call
from flask_solidq.definitions.failures import discard_on as discard_on
from flask_solidq.definitions.failures import retry_on as retry_on
from flask_solidq.definitions.job import Job as Job
from flask_solidq.definitions.running import current_job as current_job
from flask_solidq.errors import BatchAlreadyFinished as BatchAlreadyFinished
from flask_solidq.errors import CollectedJobMismatch as CollectedJobMismatch
from flask_solidq.errors import DeserializationError as DeserializationError
from flask_solidq.errors import EnqueueError as EnqueueError
from flask_solidq.errors import PendingMigrations as PendingMigrations
from flask_solidq.errors import RateLimited as RateLimited
from flask_solidq.errors import ResumptionLimitReached as ResumptionLimitReached
from flask_solidq.errors import SerializationError as SerializationError
from flask_solidq.errors import SolidQError as SolidQError
from flask_solidq.errors import StepsChanged as StepsChanged
from flask_solidq.extension import SolidQ as SolidQ
from flask_solidq.values import CoalesceStatus as CoalesceStatus

__version__ = "0.1.0"
