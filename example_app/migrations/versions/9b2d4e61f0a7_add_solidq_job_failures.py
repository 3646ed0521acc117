"""Add attempt history to the default database: solidq_job_failures, solidq_jobs.started_at.

Revision ID: 9b2d4e61f0a7
Revises: 3ec51de45a60
Create Date: 2026-12-02 13:45:00+00:00

Written by `flask solidq install` from flask-solidq's template 0004_add_solidq_job_failures
(schema version 4). It is a frozen snapshot of that change: it imports nothing from
flask_solidq, so it means the same thing whatever version of the package is installed later.
Keep the three solidq_* lines below: `flask solidq install` reads them to tell which schema
versions this history already has.

Each failed attempt of a job (a retry_on retry, a failure for good, a worker that died) gets a
solidq_job_failures row, deleted with its job (the foreign key cascades). A finished job keeps
when its last run started in solidq_jobs.started_at, a nullable column with no index: adding
it is instant on PostgreSQL, MariaDB 10.3+ and SQLite, and jobs finished before this version
simply have none.

Downgrading drops the attempt history and the start times: jobs stay.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = "9b2d4e61f0a7"
down_revision = "3ec51de45a60"
branch_labels = None
depends_on = None

# Read by `flask solidq install`.
solidq_schema_version = 4
solidq_template = "0004_add_solidq_job_failures"
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
        "solidq_job_failures",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("executions", sa.Integer(), nullable=True),
        sa.Column("error", LONGTEXT, nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["solidq_jobs.id"],
            name=op.f("fk_solidq_job_failures_job_id_solidq_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_job_failures")),
    )
    op.create_index(
        op.f("ix_solidq_job_failures_job_id_id"), "solidq_job_failures", ["job_id", "id"]
    )
    op.add_column("solidq_jobs", sa.Column("started_at", DATETIME, nullable=True))


def downgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    # SQLite before 3.35 can't drop a column: batch mode copies the table there, and is a
    # plain ALTER TABLE elsewhere.
    with op.batch_alter_table("solidq_jobs") as batch_op:
        batch_op.drop_column("started_at")
    # Dropping the table drops its index with it (MySQL refuses to drop that index alone:
    # its foreign key needs it).
    op.drop_table("solidq_job_failures")
