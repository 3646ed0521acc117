"""Add each rate-limit budget's recent admissions to the default database (solidq_rate_limits).

Revision ID: 8838138ac3d4
Revises: 9b2d4e61f0a7
Create Date: 2026-12-02 14:21:41+00:00

Written by `flask solidq install` from flask-solidq's template
0005_add_solidq_rate_limits_admissions (schema version 5). It is a frozen snapshot of that
change: it imports nothing from flask_solidq, so it means the same thing whatever version of
the package is installed later.
Keep the three solidq_* lines below: `flask solidq install` reads them to tell which schema
versions this history already has.

The column holds a small text ring of the budget's admissions over the last minutes, second by
second, which the claim writes in the UPDATE it already makes to the row; the dashboard draws
it against the limit. It is nullable with no default, so adding it is instant on PostgreSQL,
MariaDB 10.3+ and SQLite, and rows written before it read as "no admissions recorded".

Run `flask db upgrade` before starting workers of this version: their claims read and write
the column.

Downgrading drops the column: budgets keep admitting exactly as before, their pictures are gone.
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "8838138ac3d4"
down_revision = "9b2d4e61f0a7"
branch_labels = None
depends_on = None

# Read by `flask solidq install`.
solidq_schema_version = 5
solidq_template = "0005_add_solidq_rate_limits_admissions"
solidq_target = ""

# The database this revision acts on: "" is the default one, anything else an SQLALCHEMY_BINDS
# name. Flask-Migrate's multi-database env.py calls upgrade(engine_name) once per database, the
# single-database env.py calls upgrade() with no argument; both land here.
TARGET = solidq_target


def upgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.add_column("solidq_rate_limits", sa.Column("admissions", sa.Text(), nullable=True))


def downgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    # SQLite before 3.35 can't drop a column: batch mode copies the table there, and is a
    # plain ALTER TABLE elsewhere.
    with op.batch_alter_table("solidq_rate_limits") as batch_op:
        batch_op.drop_column("admissions")
