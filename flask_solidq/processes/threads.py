"""Thread mode (``--mode thread``, for development and tests): :class:`ThreadSupervisor` runs
every worker, dispatcher and scheduler as a thread of the supervisor's own process, and
starts a new one when a thread ends on its own.

Apart from :mod:`flask_solidq.processes.supervisor` as the counterpart of
:mod:`flask_solidq.processes.forks`: what the supervisor does is the same in both modes; how
a runner is started, noticed dead and stopped is not. Threads share the process, so there is
no start ledger to read when one dies: its claims follow ``SOLIDQ_ON_WORKER_DEATH``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import typing as t

from flask_solidq.operations import processes as process_roll
from flask_solidq.operations.process_commands import Order
from flask_solidq.operations.process_commands import ProcessCommand
from flask_solidq.processes.base import Runnable
from flask_solidq.processes.supervisor import CLEANUP_GRACE
from flask_solidq.processes.supervisor import RunnerSpec
from flask_solidq.processes.supervisor import Supervisor
from flask_solidq.values import ProcessKind

if t.TYPE_CHECKING:
    from flask import Flask

logger = logging.getLogger("flask_solidq")


class ThreadSupervisor(Supervisor):
    """Runs every runner as a thread of this process."""

    kind = ProcessKind.THREAD_SUPERVISOR

    def __init__(self, app: Flask, specs: t.Sequence[RunnerSpec], *, once: bool = False) -> None:
        super().__init__(app, specs, once=once)
        self.runners: dict[threading.Thread, tuple[RunnerSpec, Runnable]] = {}
        #: The runners stopped on the operator's stop command: not replaced when they end.
        self.stopped: set[Runnable] = set()

    def start_runner(self, spec: RunnerSpec) -> None:
        runner = spec.build(self.app, self.process_id)
        if self.quieted:
            runner.quiet()
        thread = threading.Thread(
            target=self._run_runner, args=(runner,), name=f"solidq-{spec.label}", daemon=True
        )
        self.runners[thread] = (spec, runner)
        thread.start()

    def _run_runner(self, runner: Runnable) -> None:
        try:
            runner.run()
        except Exception:
            logger.exception("SolidQ %s %s failed", runner.kind, runner.name)

    def check_runners(self) -> None:
        for thread, (spec, runner) in list(self.runners.items()):
            if not thread.is_alive():
                del self.runners[thread]
                if self.is_done(spec):
                    continue
                stopped = runner in self.stopped
                self.stopped.discard(runner)
                self.handle_unexpected_exit(
                    functools.partial(_has_id, process_id=runner.process_id),
                    spec.label,
                    "stopped",
                    stopped=stopped,
                )
                if not stopped:
                    self.after_unexpected_exit(spec, f"{spec.label} stopped")

    def command_runner(self, order: Order) -> None:
        for _spec, runner in self.runners.values():
            if runner.process_id != order.process_id:
                continue
            if order.command is ProcessCommand.STOP:
                self.stopped.add(runner)
                runner.stop()
            else:
                runner.quiet()

    def has_runners(self) -> bool:
        return bool(self.runners)

    def stop_runners(self, *, immediately: bool) -> None:
        """Stop the runners and wait for their threads; a second TERM or INT ends the wait
        (the threads are daemons: they end with the process)."""
        for _spec, runner in self.runners.values():
            runner.stop()
        timeout = 0.0 if immediately else self.settings.shutdown_timeout + CLEANUP_GRACE
        deadline = time.monotonic() + timeout
        for thread in self.runners:
            while thread.is_alive() and time.monotonic() < deadline:
                thread.join(min(0.1, max(0.0, deadline - time.monotonic())))
                self.heartbeat_if_due()
                if self.wait_for_interrupts(0.0):
                    deadline = 0.0
        self.runners.clear()


def _has_id(row: process_roll.ProcessRow, *, process_id: int | None) -> bool:
    return row.id == process_id
