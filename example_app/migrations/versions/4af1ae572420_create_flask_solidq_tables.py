"""Create the flask-solidq tables in the default database.

Revision ID: 4af1ae572420
Revises:
Create Date: 2026-11-30 04:33:16+00:00

Written by `flask solidq install` from flask-solidq's template
0001_create_flask_solidq_tables (schema version 1). It is a frozen snapshot of that schema: it
imports nothing from flask_solidq, so it means the same thing whatever version of the package is
installed later. Keep the three solidq_* lines below: `flask solidq install` reads them to tell
which schema versions this history already has.

Defaults (priority 0, created_at now, ...) are applied by flask-solidq when it inserts, as its
models declare them, so no column here has a server default.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = "4af1ae572420"
down_revision = None
branch_labels = None
depends_on = None

# Read by `flask solidq install`.
solidq_schema_version = 1
solidq_template = "0001_create_flask_solidq_tables"
solidq_target = ""

# The database this revision acts on: "" is the default one, anything else an SQLALCHEMY_BINDS
# name. Flask-Migrate's multi-database env.py calls upgrade(engine_name) once per database, the
# single-database env.py calls upgrade() with no argument; both land here.
TARGET = solidq_target

# Ids: BIGINT, except on SQLite, where only INTEGER PRIMARY KEY aliases the rowid.
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# Times: naive UTC with microseconds everywhere (MySQL/MariaDB keep them only as DATETIME(6)).
DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
# Payloads and errors: MySQL/MariaDB TEXT stops at 64 KiB.
LONGTEXT = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
# Keys and names: 255 is the longest a unique index takes on MySQL with utf8mb4.
KEY = sa.String(length=255)

# Every table, in creation order (each after the tables it references).
TABLES = (
    "solidq_jobs",
    "solidq_ready_executions",
    "solidq_scheduled_executions",
    "solidq_claimed_executions",
    "solidq_blocked_executions",
    "solidq_failed_executions",
    "solidq_semaphores",
    "solidq_processes",
    "solidq_pauses",
    "solidq_recurring_tasks",
    "solidq_recurring_executions",
    "solidq_rate_limits",
    "solidq_coalesce_keys",
    "solidq_coalesced_calls",
)


def upgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return

    op.create_table(
        "solidq_jobs",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("queue_name", KEY, nullable=False),
        sa.Column("class_name", KEY, nullable=False),
        sa.Column("arguments", LONGTEXT, nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("active_job_id", sa.String(length=36), nullable=True),
        sa.Column("scheduled_at", DATETIME, nullable=True),
        sa.Column("finished_at", DATETIME, nullable=True),
        sa.Column("concurrency_key", KEY, nullable=True),
        sa.Column("rate_limit_key", KEY, nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_jobs")),
    )
    op.create_index(op.f("ix_solidq_jobs_class_name"), "solidq_jobs", ["class_name"])
    op.create_index(op.f("ix_solidq_jobs_active_job_id"), "solidq_jobs", ["active_job_id"])
    op.create_index(op.f("ix_solidq_jobs_finished_at"), "solidq_jobs", ["finished_at"])
    op.create_index(
        op.f("ix_solidq_jobs_for_filtering"), "solidq_jobs", ["queue_name", "finished_at"]
    )
    op.create_index(
        op.f("ix_solidq_jobs_for_alerting"), "solidq_jobs", ["scheduled_at", "finished_at"]
    )

    op.create_table(
        "solidq_ready_executions",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("queue_name", KEY, nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["solidq_jobs.id"],
            name=op.f("fk_solidq_ready_executions_job_id_solidq_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_ready_executions")),
        sa.UniqueConstraint("job_id", name=op.f("uq_solidq_ready_executions_job_id")),
    )
    op.create_index(
        op.f("ix_solidq_ready_executions_poll_all"),
        "solidq_ready_executions",
        ["priority", "job_id"],
    )
    op.create_index(
        op.f("ix_solidq_ready_executions_poll_by_queue"),
        "solidq_ready_executions",
        ["queue_name", "priority", "job_id"],
    )

    op.create_table(
        "solidq_scheduled_executions",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("queue_name", KEY, nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("scheduled_at", DATETIME, nullable=False),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["solidq_jobs.id"],
            name=op.f("fk_solidq_scheduled_executions_job_id_solidq_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_scheduled_executions")),
        sa.UniqueConstraint("job_id", name=op.f("uq_solidq_scheduled_executions_job_id")),
    )
    op.create_index(
        op.f("ix_solidq_scheduled_executions_dispatch_all"),
        "solidq_scheduled_executions",
        ["scheduled_at", "priority", "job_id"],
    )

    op.create_table(
        "solidq_claimed_executions",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("process_id", ID, nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["solidq_jobs.id"],
            name=op.f("fk_solidq_claimed_executions_job_id_solidq_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_claimed_executions")),
        sa.UniqueConstraint("job_id", name=op.f("uq_solidq_claimed_executions_job_id")),
    )
    op.create_index(
        op.f("ix_solidq_claimed_executions_process_id_job_id"),
        "solidq_claimed_executions",
        ["process_id", "job_id"],
    )

    op.create_table(
        "solidq_blocked_executions",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("queue_name", KEY, nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("concurrency_key", KEY, nullable=False),
        sa.Column("expires_at", DATETIME, nullable=False),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["solidq_jobs.id"],
            name=op.f("fk_solidq_blocked_executions_job_id_solidq_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_blocked_executions")),
        sa.UniqueConstraint("job_id", name=op.f("uq_solidq_blocked_executions_job_id")),
    )
    op.create_index(
        op.f("ix_solidq_blocked_executions_for_release"),
        "solidq_blocked_executions",
        ["concurrency_key", "priority", "job_id"],
    )
    op.create_index(
        op.f("ix_solidq_blocked_executions_for_maintenance"),
        "solidq_blocked_executions",
        ["expires_at", "concurrency_key"],
    )

    op.create_table(
        "solidq_failed_executions",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("error", LONGTEXT, nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["solidq_jobs.id"],
            name=op.f("fk_solidq_failed_executions_job_id_solidq_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_failed_executions")),
        sa.UniqueConstraint("job_id", name=op.f("uq_solidq_failed_executions_job_id")),
    )

    op.create_table(
        "solidq_semaphores",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("key", KEY, nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.Column("expires_at", DATETIME, nullable=False),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_semaphores")),
        sa.UniqueConstraint("key", name=op.f("uq_solidq_semaphores_key")),
    )
    op.create_index(op.f("ix_solidq_semaphores_key_value"), "solidq_semaphores", ["key", "value"])
    op.create_index(op.f("ix_solidq_semaphores_expires_at"), "solidq_semaphores", ["expires_at"])

    op.create_table(
        "solidq_processes",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("last_heartbeat_at", DATETIME, nullable=False),
        sa.Column("supervisor_id", ID, nullable=True),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("hostname", KEY, nullable=True),
        sa.Column("metadata", LONGTEXT, nullable=True),
        sa.Column("name", KEY, nullable=False),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_processes")),
    )
    op.create_index(
        op.f("ix_solidq_processes_supervisor_id"), "solidq_processes", ["supervisor_id"]
    )
    op.create_index(
        op.f("ix_solidq_processes_last_heartbeat_at"), "solidq_processes", ["last_heartbeat_at"]
    )
    op.create_index(
        op.f("uq_solidq_processes_name_supervisor_id"),
        "solidq_processes",
        ["name", "supervisor_id"],
        unique=True,
    )

    op.create_table(
        "solidq_pauses",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("queue_name", KEY, nullable=False),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_pauses")),
        sa.UniqueConstraint("queue_name", name=op.f("uq_solidq_pauses_queue_name")),
    )

    op.create_table(
        "solidq_recurring_tasks",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("key", KEY, nullable=False),
        sa.Column("schedule", KEY, nullable=False),
        sa.Column("command", sa.String(length=2048), nullable=True),
        sa.Column("class_name", KEY, nullable=True),
        sa.Column("arguments", LONGTEXT, nullable=True),
        sa.Column("queue_name", KEY, nullable=True),
        sa.Column("priority", sa.Integer(), nullable=True),
        sa.Column("static", sa.Boolean(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_recurring_tasks")),
        sa.UniqueConstraint("key", name=op.f("uq_solidq_recurring_tasks_key")),
    )
    op.create_index(op.f("ix_solidq_recurring_tasks_static"), "solidq_recurring_tasks", ["static"])

    op.create_table(
        "solidq_recurring_executions",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("task_key", KEY, nullable=False),
        sa.Column("run_at", DATETIME, nullable=False),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["solidq_jobs.id"],
            name=op.f("fk_solidq_recurring_executions_job_id_solidq_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_recurring_executions")),
        sa.UniqueConstraint("job_id", name=op.f("uq_solidq_recurring_executions_job_id")),
    )
    op.create_index(
        op.f("uq_solidq_recurring_executions_task_key_run_at"),
        "solidq_recurring_executions",
        ["task_key", "run_at"],
        unique=True,
    )

    op.create_table(
        "solidq_rate_limits",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("key", KEY, nullable=False),
        sa.Column("tat", DATETIME, nullable=False),
        sa.Column("last_slot_at", DATETIME, nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_rate_limits")),
        sa.UniqueConstraint("key", name=op.f("uq_solidq_rate_limits_key")),
    )

    op.create_table(
        "solidq_coalesce_keys",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("key", KEY, nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("calls_count", sa.Integer(), nullable=False),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["solidq_jobs.id"],
            name=op.f("fk_solidq_coalesce_keys_job_id_solidq_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_coalesce_keys")),
        sa.UniqueConstraint("key", name=op.f("uq_solidq_coalesce_keys_key")),
    )
    op.create_index(op.f("ix_solidq_coalesce_keys_job_id"), "solidq_coalesce_keys", ["job_id"])

    op.create_table(
        "solidq_coalesced_calls",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("arguments", LONGTEXT, nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["solidq_jobs.id"],
            name=op.f("fk_solidq_coalesced_calls_job_id_solidq_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_coalesced_calls")),
    )
    op.create_index(
        op.f("ix_solidq_coalesced_calls_job_id_id"), "solidq_coalesced_calls", ["job_id", "id"]
    )


def downgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    # Dropping a table drops its indexes and constraints with it; children go first.
    for table in reversed(TABLES):
        op.drop_table(table)
