"""Add stacked and weighted rate limits and back-offs to the default database.

Revision ID: c38c8387b3fc
Revises: 8838138ac3d4
Create Date: 2026-12-02 18:01:02+00:00

Written by `flask solidq install` from flask-solidq's template
0006_add_solidq_rate_limit_charges_and_back_offs (schema version 6). It is a frozen snapshot
of that change: it imports nothing from flask_solidq, so it means the same thing whatever
version of the package is installed later.
Keep the three solidq_* lines below: `flask solidq install` reads them to tell which schema
versions this history already has.

Two nullable columns with no default and no index, so adding them is instant on PostgreSQL,
MariaDB 10.3+ and SQLite:
- solidq_jobs.rate_limit_charges: for a job under more than one limit, or one that costs more
  than one unit, every budget it is charged against and how many units, as JSON written at
  enqueue. Jobs under one limit of one unit (and every job stored before) keep it empty and
  are charged as before, by rate_limit_key.
- solidq_rate_limits.backed_off_until: until when a budget admits nothing, because a job
  raised RateLimited (an API said 429) or rate_limiter.back_off() was called.

Run `flask db upgrade` before starting workers of this version: their claims read and write
the columns.

Downgrading drops both: stacked limits fall back to their first budget and unit costs to one,
and a back-off in progress ends at once.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = "c38c8387b3fc"
down_revision = "8838138ac3d4"
branch_labels = None
depends_on = None

# Read by `flask solidq install`.
solidq_schema_version = 6
solidq_template = "0006_add_solidq_rate_limit_charges_and_back_offs"
solidq_target = ""

# The database this revision acts on: "" is the default one, anything else an SQLALCHEMY_BINDS
# name. Flask-Migrate's multi-database env.py calls upgrade(engine_name) once per database, the
# single-database env.py calls upgrade() with no argument; both land here.
TARGET = solidq_target

DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.add_column("solidq_jobs", sa.Column("rate_limit_charges", sa.Text(), nullable=True))
    op.add_column("solidq_rate_limits", sa.Column("backed_off_until", DATETIME, nullable=True))


def downgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    # SQLite before 3.35 can't drop a column: batch mode copies the table there, and is a
    # plain ALTER TABLE elsewhere.
    with op.batch_alter_table("solidq_rate_limits") as batch_op:
        batch_op.drop_column("backed_off_until")
    with op.batch_alter_table("solidq_jobs") as batch_op:
        batch_op.drop_column("rate_limit_charges")
