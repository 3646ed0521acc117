"""Fork mode, the default: :class:`ForkSupervisor` runs each worker (times its ``processes``),
dispatcher and scheduler as a forked child process, reaps the children that exit and starts
their replacements.

Apart from :mod:`flask_solidq.processes.supervisor` because this is the part that deals in OS
processes: forking (with no thread of the supervisor's running and no pooled connection shared
with the child), the child's own signal handlers, ``waitpid`` and exit statuses, the TERM /
QUIT / KILL sequence that stops the children.

The operator's commands reach a child as signals: TERM to stop (then it is not replaced),
:data:`~flask_solidq.processes.commands.QUIET_SIGNAL` to quiet.

A worker child lists the jobs it claimed ahead and hasn't started in a
:class:`~flask_solidq.processes.pool.StartLedger`, memory this supervisor makes before the
fork and so shares with it. When the child dies, those jobs go back to ready first, whatever
``SOLIDQ_ON_WORKER_DEATH`` says (:meth:`~flask_solidq.processes.supervisor.Supervisor.
handle_unexpected_exit`), and while stopping they aren't counted among the running jobs the
stop waits for.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import time
import typing as t

import sqlalchemy as sa

from flask_solidq.operations import processes as process_roll
from flask_solidq.operations.process_commands import Order
from flask_solidq.operations.process_commands import ProcessCommand
from flask_solidq.processes.commands import QUIET_SIGNAL
from flask_solidq.processes.pool import StartLedger
from flask_solidq.processes.pool import UsesStartLedger
from flask_solidq.processes.supervisor import CLEANUP_GRACE
from flask_solidq.processes.supervisor import RunnerSpec
from flask_solidq.processes.supervisor import Supervisor
from flask_solidq.values import ProcessKind

if t.TYPE_CHECKING:
    from flask import Flask

logger = logging.getLogger("flask_solidq")


class ForkSupervisor(Supervisor):
    """Runs each runner in a forked child process."""

    kind = ProcessKind.FORK_SUPERVISOR

    def __init__(self, app: Flask, specs: t.Sequence[RunnerSpec], *, once: bool = False) -> None:
        super().__init__(app, specs, once=once)
        self.children: dict[int, RunnerSpec] = {}
        #: Each worker child's start ledger, by pid (see pool.StartLedger).
        self.ledgers: dict[int, StartLedger] = {}
        #: The children TERMed on the operator's stop command: not replaced when they end.
        self.stopped: set[int] = set()

    def start_runner(self, spec: RunnerSpec) -> None:
        # Close the pooled connections first: a forked child must never share one.
        for engine in self._engines():
            engine.dispose()
        # Made before the fork, so that the child's writes are in memory the parent reads.
        ledger = StartLedger(spec.ledger_slots) if spec.ledger_slots else None
        pid = os.fork()
        if pid == 0:
            self._run_child(spec, ledger)
        self.children[pid] = spec
        if ledger is not None:
            self.ledgers[pid] = ledger

    def queued_jobs(self) -> set[int]:
        # Read while the children write: a slot caught mid-write reads as not listed, and
        # the job is counted as running, which only this count sees.
        return {job_id for ledger in self.ledgers.values() for job_id in ledger.listed()}

    def _engines(self) -> set[sa.Engine]:
        return {*self.state.own_engines(), *self.state.sqlalchemy.engines.values()}

    def _run_child(self, spec: RunnerSpec, ledger: StartLedger | None) -> t.NoReturn:
        code = 1
        try:
            self.interrupts.restore()
            for engine in self._engines():
                # Connections opened before the fork belong to the parent: a child that used
                # them would garble both sides' conversations with the server.
                engine.dispose(close=False)
            for sibling in self.ledgers.values():
                sibling.close()  # the other children's: this one has no business there
            runner = spec.build(self.app, self.process_id)
            if ledger is not None and isinstance(runner, UsesStartLedger):
                runner.use_start_ledger(ledger)
            runner.parent_pid = self.pid  # type: ignore[attr-defined]
            signal.signal(signal.SIGTERM, lambda *_: runner.stop())
            signal.signal(signal.SIGINT, lambda *_: runner.stop())
            signal.signal(signal.SIGQUIT, lambda *_: os._exit(1))
            signal.signal(QUIET_SIGNAL, lambda *_: runner.quiet())
            if self.quieted:
                runner.quiet()
            runner.run()
            code = 0
        except BaseException:  # noqa: BLE001 - a child reports and exits, whatever happened
            logger.exception("SolidQ %s failed", spec.label)
        finally:
            logging.shutdown()
            os._exit(code)

    def check_runners(self) -> None:
        for pid, status in self._reap():
            spec = self.children.pop(pid, None)
            ledger = self.ledgers.pop(pid, None)
            if spec is None:
                continue
            done = self.is_done(spec)
            stopped = pid in self.stopped
            self.stopped.discard(pid)
            label = f"{spec.label} (pid {pid})"
            if not done:
                self.handle_unexpected_exit(
                    functools.partial(_has_pid, pid=pid),
                    label,
                    _describe_status(status),
                    never_started=ledger.listed() if ledger is not None else (),
                    stopped=stopped,
                )
            if ledger is not None:
                ledger.close()
            if not done and not stopped:
                self.after_unexpected_exit(spec, f"{label} {_describe_status(status)}")

    def command_runner(self, order: Order) -> None:
        if order.pid not in self.children:
            return
        if order.command is ProcessCommand.STOP:
            self.stopped.add(order.pid)
        signum = signal.SIGTERM if order.command is ProcessCommand.STOP else QUIET_SIGNAL
        try:
            os.kill(order.pid, signum)
        except ProcessLookupError:  # it just exited: check_runners reaps it
            pass

    def has_runners(self) -> bool:
        return bool(self.children)

    def stop_runners(self, *, immediately: bool) -> None:
        """TERM the children and wait for them (a second TERM or INT cuts the wait short),
        then QUIT those left; KILL any that even QUIT left."""
        if not immediately:
            self._signal_children(signal.SIGTERM)
            timeout = self.settings.shutdown_timeout + CLEANUP_GRACE
            if not self._wait_for_children(timeout, interruptible=True) and not self._stop_now:
                logger.warning("SolidQ shutdown timeout exceeded; quitting the remaining processes")
        if self.children:
            self._signal_children(signal.SIGQUIT)
            self._wait_for_children(2.0)
        self._signal_children(signal.SIGKILL)
        self._wait_for_children(2.0)

    def _signal_children(self, signum: int) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                self.children.pop(pid, None)

    def _wait_for_children(self, timeout: float, *, interruptible: bool = False) -> bool:
        """Wait up to ``timeout`` seconds for the children to exit; return whether they all
        did. ``interruptible``: give up as soon as an interrupt asks to stop at once."""
        deadline = time.monotonic() + timeout
        while self.children and time.monotonic() < deadline:
            for pid, _status in self._reap():
                self.children.pop(pid, None)
                ledger = self.ledgers.pop(pid, None)
                if ledger is not None:
                    ledger.close()
            self.heartbeat_if_due()
            if self.wait_for_interrupts(0.05) and interruptible:
                return False
        return not self.children

    def _reap(self) -> list[tuple[int, int]]:
        reaped: list[tuple[int, int]] = []
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return reaped
            if pid == 0:
                return reaped
            reaped.append((pid, status))


def _has_pid(row: process_roll.ProcessRow, *, pid: int) -> bool:
    return row.pid == pid


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"
