"""How a supervisor reads the operator's commands (:mod:`flask_solidq.processes.commands`),
on every backend: one statement a read, at most one read per interval however often the
supervisor's loop asks, only its own tree's commands, and each command handed on once."""

from __future__ import annotations

import typing as t

import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.operations import process_commands
from flask_solidq.operations.process_commands import Order
from flask_solidq.operations.process_commands import ProcessCommand
from flask_solidq.processes import commands
from flask_solidq.timing import utcnow

PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)


def add_process(engine: sa.Engine, kind: str, name: str, supervisor_id: int | None = None) -> int:
    now = utcnow()
    values = {"kind": kind, "name": name, "pid": 100 + len(name), "supervisor_id": supervisor_id}
    with engine.begin() as connection:
        statement = PROCESSES.insert().values(**values, last_heartbeat_at=now, created_at=now)
        return int(connection.execute(statement).inserted_primary_key[0])


class Statements:
    """Counts the statements ``engine`` sends while it is on."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.count = 0

    def _count(self, *_args: t.Any) -> None:
        self.count += 1

    def __enter__(self) -> Statements:
        sa.event.listen(self.engine, "before_cursor_execute", self._count)
        return self

    def __exit__(self, *exc_info: t.Any) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._count)


def test_a_supervisor_reads_its_trees_commands_once_an_interval_in_one_statement(
    app, engine, monkeypatch
):
    clock = [1000.0]
    monkeypatch.setattr(commands.time, "monotonic", lambda: clock[0])
    supervisor = add_process(engine, "Supervisor(fork)", "supervisor-1")
    worker = add_process(engine, "Worker", "worker-1", supervisor)
    other = add_process(engine, "Supervisor(fork)", "supervisor-2")
    add_process(engine, "Worker", "worker-2", other)
    watch = commands.CommandWatch()

    with Statements(engine) as statements:
        assert watch.due()
        assert watch.new_orders(engine, supervisor) == []  # nothing asked: the usual read
        assert statements.count == 1
        clock[0] += commands.CHECK_INTERVAL - 0.01
        assert not watch.due()
    process_commands.give(engine, "worker-1", ProcessCommand.QUIET)
    process_commands.give(engine, "supervisor-2", ProcessCommand.STOP)
    clock[0] += 0.01

    assert watch.due()
    (order,) = watch.new_orders(engine, supervisor)  # its own tree's, not supervisor-2's
    assert order == Order(worker, order.pid, ProcessCommand.QUIET)
    clock[0] += commands.CHECK_INTERVAL
    assert watch.new_orders(engine, supervisor) == []  # handed on once
    process_commands.give(engine, worker, ProcessCommand.STOP)
    clock[0] += commands.CHECK_INTERVAL
    assert [order.command for order in watch.new_orders(engine, supervisor)] == [
        ProcessCommand.STOP
    ]
