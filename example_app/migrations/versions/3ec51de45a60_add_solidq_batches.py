"""Add batches to the default database: the solidq_batches table and solidq_jobs.batch_id.

Revision ID: 3ec51de45a60
Revises: 03171e82fa8a
Create Date: 2026-12-02 10:10:02+00:00

Written by `flask solidq install` from flask-solidq's template 0003_add_solidq_batches
(schema version 3). It is a frozen snapshot of that change: it imports nothing from
flask_solidq, so it means the same thing whatever version of the package is installed later.
Keep the three solidq_* lines below: `flask solidq install` reads them to tell which schema
versions this history already has.

A batch (`with solidq.batch(...)`) keeps its counters on its solidq_batches row; each job of a
batch names it in solidq_jobs.batch_id, a nullable column with no foreign key (a job outlives
its batch's row once that is cleared). Adding the column is instant on PostgreSQL, MariaDB
10.3+ and SQLite; building its index reads solidq_jobs once (a few seconds at 1,000,000 jobs
on PostgreSQL), and enqueues wait for it: migrate at a quiet moment.

Downgrading drops the batches and every job's batch id: jobs stay, their batches are gone.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = "3ec51de45a60"
down_revision = "03171e82fa8a"
branch_labels = None
depends_on = None

# Read by `flask solidq install`.
solidq_schema_version = 3
solidq_template = "0003_add_solidq_batches"
solidq_target = ""

# The database this revision acts on: "" is the default one, anything else an SQLALCHEMY_BINDS
# name. Flask-Migrate's multi-database env.py calls upgrade(engine_name) once per database, the
# single-database env.py calls upgrade() with no argument; both land here.
TARGET = solidq_target

# The column types of schema version 1, frozen here.
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
LONGTEXT = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


def upgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.create_table(
        "solidq_batches",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("metadata", LONGTEXT, nullable=True),
        sa.Column("on_success", LONGTEXT, nullable=True),
        sa.Column("on_failure", LONGTEXT, nullable=True),
        sa.Column("on_finish", LONGTEXT, nullable=True),
        sa.Column("total_jobs", sa.Integer(), nullable=False),
        sa.Column("pending_jobs", sa.Integer(), nullable=False),
        sa.Column("completed_jobs", sa.Integer(), nullable=False),
        sa.Column("failed_jobs", sa.Integer(), nullable=False),
        sa.Column("enqueued_at", DATETIME, nullable=True),
        sa.Column("finished_at", DATETIME, nullable=True),
        sa.Column("failed_at", DATETIME, nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_batches")),
    )
    op.create_index(op.f("ix_solidq_batches_finished_at"), "solidq_batches", ["finished_at"])
    op.add_column("solidq_jobs", sa.Column("batch_id", ID, nullable=True))
    # Partial on PostgreSQL and SQLite: the jobs of no batch cost this index nothing.
    op.create_index(
        op.f("ix_solidq_jobs_batch_id"),
        "solidq_jobs",
        ["batch_id", "id"],
        postgresql_where=sa.text("batch_id IS NOT NULL"),
        sqlite_where=sa.text("batch_id IS NOT NULL"),
    )


def downgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.drop_index(op.f("ix_solidq_jobs_batch_id"), table_name="solidq_jobs")
    # SQLite before 3.35 can't drop a column: batch mode copies the table there, and is a
    # plain ALTER TABLE elsewhere.
    with op.batch_alter_table("solidq_jobs") as batch_op:
        batch_op.drop_column("batch_id")
    op.drop_index(op.f("ix_solidq_batches_finished_at"), table_name="solidq_batches")
    op.drop_table("solidq_batches")
