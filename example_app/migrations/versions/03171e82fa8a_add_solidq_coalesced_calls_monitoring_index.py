"""Index the coalesced calls by their time in the default database, for the oldest waiting call.

Revision ID: 03171e82fa8a
Revises: d1b6c5237163
Create Date: 2026-12-02 09:05:57+00:00

Written by `flask solidq install` from flask-solidq's template
0002_add_solidq_coalesced_calls_monitoring_index (schema version 2). It is a frozen snapshot of
that change: it imports nothing from flask_solidq, so it means the same thing whatever version of
the package is installed later. Keep the three solidq_* lines below: `flask solidq install`
reads them to tell which schema versions this history already has.

Schema version 1 indexed the calls only by their job, so the oldest waiting call
(`CoalescedCall.waiting().order_by(CoalescedCall.created_at).limit(1)`) read every waiting
call: about 300 ms at 1,000,000 of them on PostgreSQL. This index lets the database walk the
calls from the oldest one and stop at the first whose job still waits: a few milliseconds, plus
the calls older than it that finished jobs keep until they are cleared. The job id is in the
index so that walk reads no table row of a call it skips. Building it reads the table once
(under a second for 1,100,000 calls on PostgreSQL); enqueues that collect calls wait for it.
"""

from alembic import op

# revision identifiers, used by Alembic.
revision = "03171e82fa8a"
down_revision = "d1b6c5237163"
branch_labels = None
depends_on = None

# Read by `flask solidq install`.
solidq_schema_version = 2
solidq_template = "0002_add_solidq_coalesced_calls_monitoring_index"
solidq_target = ""

# The database this revision acts on: "" is the default one, anything else an SQLALCHEMY_BINDS
# name. Flask-Migrate's multi-database env.py calls upgrade(engine_name) once per database, the
# single-database env.py calls upgrade() with no argument; both land here.
TARGET = solidq_target


def upgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.create_index(
        op.f("ix_solidq_coalesced_calls_for_monitoring"),
        "solidq_coalesced_calls",
        ["created_at", "job_id"],
    )


def downgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.drop_index(
        op.f("ix_solidq_coalesced_calls_for_monitoring"), table_name="solidq_coalesced_calls"
    )
