"""Add nested batches to the default database: solidq_batches.parent_id.

Revision ID: f5ed861bd051
Revises: c38c8387b3fc
Create Date: 2026-12-05 13:58:43+00:00

Written by `flask solidq install` from flask-solidq's template 0007_add_solidq_batch_parents
(schema version 7). It is a frozen snapshot of that change: it imports nothing from
flask_solidq, so it means the same thing whatever version of the package is installed later.
Keep the three solidq_* lines below: `flask solidq install` reads them to tell which schema
versions this history already has.

A batch opened inside a running job of another batch (or with `solidq.batch(parent=...)`) is
its child: solidq_batches.parent_id names the parent, a nullable column with no default and no
foreign key (a child outlives its parent's row once that is cleared), so adding it is instant on
PostgreSQL, MariaDB 10.3+ and SQLite. Its index is partial on PostgreSQL and SQLite: batches
without a parent cost it nothing.

Downgrading drops the column and its index: children become batches of their own (their
parents, if still open, keep counting them as pending jobs until they finish).
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "f5ed861bd051"
down_revision = "c38c8387b3fc"
branch_labels = None
depends_on = None

# Read by `flask solidq install`.
solidq_schema_version = 7
solidq_template = "0007_add_solidq_batch_parents"
solidq_target = ""

# The database this revision acts on: "" is the default one, anything else an SQLALCHEMY_BINDS
# name. Flask-Migrate's multi-database env.py calls upgrade(engine_name) once per database, the
# single-database env.py calls upgrade() with no argument; both land here.
TARGET = solidq_target

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.add_column("solidq_batches", sa.Column("parent_id", ID, nullable=True))
    op.create_index(
        op.f("ix_solidq_batches_parent_id"),
        "solidq_batches",
        ["parent_id"],
        postgresql_where=sa.text("parent_id IS NOT NULL"),
        sqlite_where=sa.text("parent_id IS NOT NULL"),
    )


def downgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.drop_index(op.f("ix_solidq_batches_parent_id"), table_name="solidq_batches")
    # SQLite before 3.35 can't drop a column: batch mode copies the table there, and is a
    # plain ALTER TABLE elsewhere.
    with op.batch_alter_table("solidq_batches") as batch_op:
        batch_op.drop_column("parent_id")
