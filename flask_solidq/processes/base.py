"""What every flask-solidq process shares: its row on the process roll (``solidq_processes``,
kept by :mod:`flask_solidq.operations.processes`), heartbeats, and a life of boot, run, shut
down.

A process (a runner: worker, dispatcher or scheduler) runs in the thread that calls
:meth:`Runnable.run` (the main thread of a forked child, or a thread of the supervisor in thread
mode). Its row says it is alive: it heartbeats every ``SOLIDQ_PROCESS_HEARTBEAT_INTERVAL``; a
heartbeat that finds the row gone means another supervisor pruned it, and the process stops.

Its life runs the app's lifecycle hooks (``@solidq.on_process_start``, ``on_worker_start``,
``on_worker_stop``, see :class:`LifecycleHooks`), in the app context, in the process's own
thread: right after the fork, before anything else; once a worker booted, before its first
claim; when it stops, once its jobs are done. A hook that raises stops the process with an
error, which its supervisor reports and replaces as it does any runner that dies. The errors
its threads carry on through go to :meth:`Runnable.report_thread_error`.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
import typing as t

import sqlalchemy as sa

from flask_solidq.lifecycle import HookFailed
from flask_solidq.lifecycle import Lifecycle
from flask_solidq.lifecycle import ProcessInfo
from flask_solidq.operations import processes as process_roll
from flask_solidq.processes.outage import Outage
from flask_solidq.processes.signal_safe_waker import Waker
from flask_solidq.processes.signal_safe_waker import Watched
from flask_solidq.processes.thread_errors import ThreadActivity
from flask_solidq.processes.thread_errors import report_thread_error
from flask_solidq.values import JSONValue
from flask_solidq.values import ProcessKind

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.config import Settings
    from flask_solidq.state import SolidQState

logger = logging.getLogger("flask_solidq")


#: The hooks run after boot and at shutdown, by process kind.
_START_HOOKS = {ProcessKind.WORKER: Lifecycle.WORKER_START}
_STOP_HOOKS = {ProcessKind.WORKER: Lifecycle.WORKER_STOP}


class Runnable:
    """A registered process with a stop flag and a wake-up.

    Subclasses say what ``kind`` they are, what ``metadata`` they register with, and what
    they do in :meth:`loop`; :meth:`boot` and :meth:`shutdown` may add to the life around it.
    """

    kind: t.ClassVar[str] = "Process"

    def __init__(self, app: Flask, *, supervisor_id: int | None = None) -> None:
        self.app = app
        self.state: SolidQState = app.extensions["solidq"]
        self.supervisor_id = supervisor_id
        self.name = f"{self.kind.split('(')[0].lower()}-{secrets.token_hex(10)}"
        self.process_id: int | None = None
        self.pid = os.getpid()
        # A plain flag and a pipe, not Events: stop() runs in signal handlers (see
        # signal_safe_waker.py).
        self._stopping = False
        #: Told to quiet (see :meth:`quiet`); a plain flag too, set from a signal handler.
        self._quiet = False
        self._waker = Waker()
        self._heartbeat_stopped = threading.Event()
        self._heartbeat: threading.Thread | None = None
        #: The database outage this process is living through, logged once (outage.py); it
        #: hands the other errors of the process's threads to :meth:`report_thread_error`.
        self.outage = Outage(f"{self.kind} {self.name}", report=self.report_thread_error)
        #: Whether the start hooks ran, so the stop hooks are due.
        self._started_lifecycle_hooks = False

    @property
    def engine(self) -> sa.Engine:
        return self.state.engine

    @property
    def settings(self) -> Settings:
        return self.state.settings

    @property
    def metadata(self) -> dict[str, JSONValue]:
        """What the process registers about itself (queues, threads, intervals...)."""
        return {}

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def info(self) -> ProcessInfo:
        """The process, as lifecycle hooks see it."""
        return ProcessInfo(self.kind, self.name, os.getpid(), dict(self.metadata))

    def run(self) -> None:
        """Run the start hooks, boot, run the loop until stopped, shut down; in the calling
        thread.

        :raises HookFailed: a lifecycle hook raised.
        """
        with self.app.app_context():
            try:
                self.run_lifecycle_hooks(Lifecycle.PROCESS_START)
            except HookFailed:
                self._waker.close()  # shutdown, which would close it, won't run
                raise
            self.boot()
            try:
                self._run_start_lifecycle_hooks()
                self.loop()
            finally:
                self.shutdown()

    def run_lifecycle_hooks(self, moment: Lifecycle) -> None:
        """Run the app's lifecycle hooks of ``moment`` for this process (app context).

        :raises HookFailed: a hook raised.
        """
        self.state.lifecycle_hooks.run(moment, self.info)

    def _run_start_lifecycle_hooks(self) -> None:
        moment = _START_HOOKS.get(self.kind)
        if moment is not None:
            self.run_lifecycle_hooks(moment)
        self._started_lifecycle_hooks = True

    def _run_stop_lifecycle_hooks(self) -> HookFailed | None:
        """Run the stop hooks (once the start hooks ran); return their failure, if any, so
        the process deregisters before it stops with the error."""
        moment = _STOP_HOOKS.get(self.kind)
        if moment is None or not self._started_lifecycle_hooks:
            return None
        self._started_lifecycle_hooks = False
        try:
            self.run_lifecycle_hooks(moment)
        except HookFailed as failure:
            return failure
        return None

    def report_thread_error(self, error: BaseException, where: ThreadActivity) -> None:
        """Hand an error one of this process's threads carries on through to
        ``signals.thread_error`` and ``SOLIDQ_ON_THREAD_ERROR`` (any thread)."""
        report_thread_error(self.app, error, where=where, process=self.name)

    def stop(self) -> None:
        """Ask the process to stop after its current step (any thread, or a signal handler)."""
        self._stopping = True
        self.wake_up()

    def quiet(self) -> None:
        """Ask the process to take no more work and finish what it runs (any thread, or a
        signal handler). Only a worker has work to refuse: :class:`~flask_solidq.processes.
        worker.Worker` acts on it; the others ignore it."""
        self._quiet = True
        self.wake_up()

    @property
    def registered_command(self) -> str | None:
        """The command the process's row starts with: a worker started quiet says so."""
        return None

    def wake_up(self) -> None:
        """End the current sleep at once (any thread, or a signal handler)."""
        self._waker.ring()

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``, ending early when woken or stopped."""
        if not self.stopping:
            self._waker.sleep(seconds, self.watched())

    def watched(self) -> list[Watched]:
        """Descriptors that bring wake-ups from other processes, to wait on while asleep."""
        return []

    def loop(self) -> None:
        raise NotImplementedError

    def boot(self) -> None:
        """Register, start heartbeating, say so in the log."""
        self.pid = os.getpid()
        self.register()
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name=f"{self.name}-heartbeat", daemon=True
        )
        self._heartbeat.start()
        logger.info(
            "SolidQ started %s %s (pid %s) %s",
            self.kind,
            self.name,
            self.pid,
            _describe(self.metadata),
        )

    def shutdown(self) -> None:
        """Stop heartbeating and deregister: the process heartbeats until then, so a worker
        draining its jobs for the whole shutdown timeout isn't pruned as dead meanwhile.

        A worker's ``on_worker_stop`` hooks run first (its jobs are done by then).

        :raises HookFailed: a stop hook raised; the process deregistered all the same.
        """
        self._stopping = True
        failure = self._run_stop_lifecycle_hooks()
        self._heartbeat_stopped.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
        self.deregister()
        self._waker.close()
        logger.info("SolidQ stopped %s %s (pid %s)", self.kind, self.name, self.pid)
        if failure is not None:
            raise failure

    def register(self) -> None:
        """Put the process on the process roll (insert its row)."""
        self.process_id = process_roll.register(
            self.engine,
            kind=self.kind,
            name=self.name,
            pid=self.pid,
            supervisor_id=self.supervisor_id,
            metadata=self.metadata,
            command=self.registered_command,
        )

    def deregister(self) -> None:
        """Delete the process's row, if it still exists."""
        if self.process_id is None:
            return
        try:
            process_roll.deregister(self.engine, self.process_id)
        except sa.exc.SQLAlchemyError as error:
            logger.warning("SolidQ couldn't deregister %s %s", self.kind, self.name, exc_info=True)
            self.report_thread_error(error, ThreadActivity.SHUTDOWN)

    def heartbeat(self) -> bool:
        """Touch the process's row; return False when it's gone (pruned by someone else)."""
        return process_roll.heartbeat(self.engine, t.cast(int, self.process_id))

    def _heartbeat_loop(self) -> None:
        interval = self.settings.process_heartbeat_interval
        while not self._heartbeat_stopped.wait(interval):
            started = time.monotonic()
            try:
                alive = self.heartbeat()
            except sa.exc.SQLAlchemyError as error:
                if not self.outage.failed(
                    error, started=started, retry_every=interval, where=ThreadActivity.HEARTBEAT
                ):
                    logger.warning(
                        "SolidQ heartbeat of %s failed; trying again", self.name, exc_info=True
                    )
                continue
            self.outage.succeeded(started=started)
            if not alive:
                logger.warning(
                    "SolidQ %s %s was pruned by another process; stopping", self.kind, self.name
                )
                self.process_id = None
                self.stop()
                return


def _describe(metadata: dict[str, JSONValue]) -> str:
    return " ".join(f"{key}={value}" for key, value in metadata.items())
