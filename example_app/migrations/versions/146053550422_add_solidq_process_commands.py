"""Add process commands to the default database: solidq_processes.command.

Revision ID: 146053550422
Revises: b03598756422
Create Date: 2026-12-06 20:42:13+00:00

Written by `flask solidq install` from flask-solidq's template 0009_add_solidq_process_commands
(schema version 9). It is a frozen snapshot of that change: it imports nothing from
flask_solidq, so it means the same thing whatever version of the package is installed later.
Keep the three solidq_* lines below: `flask solidq install` reads them to tell which schema
versions this history already has.

`flask solidq quiet` and `flask solidq stop` (and the dashboard's buttons) write "quiet" or
"stop" into solidq_processes.command of a process (and of the processes its supervisor runs);
each supervisor reads the commands of its own tree about once a second and carries them out.
A nullable column with no default, so adding it is instant on PostgreSQL, MariaDB 10.3+ and
SQLite; no index: a supervisor reads its tree through the primary key and supervisor_id's.

Downgrading drops the column: commands not yet carried out are forgotten.
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "146053550422"
down_revision = "b03598756422"
branch_labels = None
depends_on = None

# Read by `flask solidq install`.
solidq_schema_version = 9
solidq_template = "0009_add_solidq_process_commands"
solidq_target = ""

# The database this revision acts on: "" is the default one, anything else an SQLALCHEMY_BINDS
# name. Flask-Migrate's multi-database env.py calls upgrade(engine_name) once per database, the
# single-database env.py calls upgrade() with no argument; both land here.
TARGET = solidq_target


def upgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    op.add_column("solidq_processes", sa.Column("command", sa.String(16), nullable=True))


def downgrade(engine_name: str = "") -> None:
    if engine_name != TARGET:
        return
    # SQLite before 3.35 can't drop a column: batch mode copies the table there, and is a
    # plain ALTER TABLE elsewhere.
    with op.batch_alter_table("solidq_processes") as batch_op:
        batch_op.drop_column("command")
