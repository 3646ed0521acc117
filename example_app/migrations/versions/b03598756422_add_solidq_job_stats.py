"""Add job statistics to the default database: solidq_job_stats.

Revision ID: b03598756422
Revises: f5ed861bd051
Create Date: 2026-12-06 20:22:49+00:00

Written by `flask solidq install` from flask-solidq's template 0008_add_solidq_job_stats
(schema version 8). It is a frozen snapshot of that change: it imports nothing from
flask_solidq, so it means the same thing whatever version of the package is installed later.
Keep the three solidq_* lines below: `flask solidq install` reads them to tell which schema
versions this history already has.

One row per minute, job class and queue: how many runs ended, how many raised, their
durations and queue latencies (sums, maxima, and a count per band of a histogram whose bands
double in width, 24 each). Workers add their counts to it every few seconds; the supervisors
delete the rows older than SOLIDQ_STATS_RETENTION. A new table, so adding it touches no
existing row.

Run `flask db upgrade` before starting workers of this version: they write the table.

Downgrading drops the table and the statistics in it: jobs stay.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# revision identifiers, used by Alembic.
revision = "b03598756422"
down_revision = "f5ed861bd051"
branch_labels = None
depends_on = None

# Read by `flask solidq install`.
solidq_schema_version = 8
solidq_template = "0008_add_solidq_job_stats"
solidq_target = ""

# The database this revision acts on: "" is the default one, anything else an SQLALCHEMY_BINDS
# name. Flask-Migrate's multi-database env.py calls upgrade(engine_name) once per database, the
# single-database env.py calls upgrade() with no argument; both land here.
TARGET = solidq_target

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
BANDS = 24


def _count(name: str) -> sa.Column:
    return sa.Column(name, sa.Integer(), nullable=False)


def _seconds(name: str) -> sa.Column:
    return sa.Column(name, sa.Double(), nullable=False)


def upgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.create_table(
        "solidq_job_stats",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("minute_at", DATETIME, nullable=False),
        sa.Column("class_name", sa.String(length=255), nullable=False),
        sa.Column("queue_name", sa.String(length=255), nullable=False),
        _count("runs"),
        _count("failures"),
        _seconds("duration_total"),
        _seconds("duration_max"),
        _seconds("latency_total"),
        _seconds("latency_max"),
        *(_count(f"duration_band_{band:02d}") for band in range(BANDS)),
        *(_count(f"latency_band_{band:02d}") for band in range(BANDS)),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solidq_job_stats")),
        sa.UniqueConstraint(
            "minute_at",
            "class_name",
            "queue_name",
            name=op.f("uq_solidq_job_stats_minute_at_class_name_queue_name"),
        ),
    )


def downgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.drop_table("solidq_job_stats")
