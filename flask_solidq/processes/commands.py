"""How a supervisor hears the operator's commands (``flask solidq quiet``/``stop``, the
dashboard's buttons), written into ``solidq_processes.command`` by
:mod:`flask_solidq.operations.process_commands` from any host.

The supervisor reads the commands of its own tree (itself and the processes it runs) every
:data:`CHECK_INTERVAL` seconds from its loop, in one read by primary key and
``supervisor_id`` that finds nothing almost always: one cheap statement a second per
supervisor, not one per process, and none on the hot path of claiming. It carries out each
command once: stop itself (gracefully, as on TERM), or hand a runner its command: in fork
mode by an OS signal (TERM to stop, :data:`QUIET_SIGNAL` to quiet), in thread mode by a
call.
"""

from __future__ import annotations

import signal
import time

import sqlalchemy as sa

from flask_solidq.operations import process_commands
from flask_solidq.operations.process_commands import Order
from flask_solidq.operations.process_commands import ProcessCommand

#: Seconds between a supervisor's reads of its tree's commands.
CHECK_INTERVAL = 1.0
#: What a fork supervisor sends a child it quiets (not TSTP, which a terminal's Ctrl-Z sends
#: to the whole process group).
QUIET_SIGNAL = signal.SIGUSR1


class CommandWatch:
    """The commands a supervisor has read, so it carries out each once."""

    def __init__(self, interval: float = CHECK_INTERVAL) -> None:
        self.interval = interval
        self._next = 0.0
        self._carried_out: dict[int, ProcessCommand] = {}

    def due(self) -> bool:
        """Whether the interval since the last read has passed."""
        return time.monotonic() >= self._next

    def new_orders(self, engine: sa.Engine, supervisor_id: int) -> list[Order]:
        """Read the tree's commands; return those not carried out yet, and count them as
        carried out (the supervisor does so at once)."""
        self._next = time.monotonic() + self.interval
        orders = process_commands.pending(engine, supervisor_id)
        fresh = [
            order
            for order in orders
            if self._carried_out.get(order.process_id) is not order.command
        ]
        self._carried_out = {order.process_id: order.command for order in orders}
        return fresh
