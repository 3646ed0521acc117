"""The supervisor: starts the configured processes, watches them, replaces those that die,
prunes processes gone silent anywhere, and stops everything on TERM, INT or QUIT.

Fork mode (the default) runs each worker (times its ``processes``), dispatcher and scheduler
as an OS process of its own; thread mode runs them all as threads of this process, for
development and tests. The supervisor keeps no threads of its own in fork mode (it heartbeats
and prunes from its loop), so forking never copies a lock held by another thread.

* TERM / INT: stop gracefully, saying how many jobs are running and how long they get. Workers
  stop claiming, wait up to ``SOLIDQ_SHUTDOWN_TIMEOUT`` for running jobs and release the rest
  back to ready (and say which); then everyone deregisters.
* QUIT, or a second TERM / INT while stopping (a second Ctrl-C): stop at once. The claims of
  processes that had no time to clean up are released, and the jobs named.
* A child that exits unexpectedly is replaced, after its claims follow
  ``SOLIDQ_ON_WORKER_DEATH`` (failed with the exit status as the reason, or released). In
  fork mode the jobs a dead worker had claimed ahead and never started go back to ready
  first, whatever the policy: each worker child lists them in a :class:`~flask_solidq.
  processes.pool.StartLedger`, memory the supervisor shares with it from before the fork.
  A worker lost where no supervisor sees it die (its machine, say) is pruned for silence,
  and then the policy applies to all its claims, since nobody can tell which had started.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import signal
import threading
import time
import typing as t

import sqlalchemy as sa

from flask_solidq.config import OnWorkerDeath
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.operations import processes as registry
from flask_solidq.operations import release
from flask_solidq.processes import interrupts as interrupts_module
from flask_solidq.processes.base import Runnable
from flask_solidq.processes.base import ThreadActivity
from flask_solidq.processes.interrupts import GRACEFUL
from flask_solidq.processes.interrupts import Interrupts
from flask_solidq.processes.pool import StartLedger
from flask_solidq.processes.pool import UsesStartLedger

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.values import JobRef

logger = logging.getLogger("flask_solidq")

#: Seconds between the supervisor's checks of its children.
SUPERVISE_INTERVAL = 0.5
#: Seconds, beyond the shutdown timeout, children get to clean up before they are QUIT.
CLEANUP_GRACE = 5.0


@dataclasses.dataclass(frozen=True)
class RunnerSpec:
    """One process the supervisor keeps running: how to build it, and a label for logs."""

    label: str
    build: t.Callable[[Flask, int | None], Runnable]
    #: Slots of the start ledger a forked child gets (a worker: threads + prefetch); 0 for
    #: none.
    ledger_slots: int = 0


class Supervisor(Runnable):
    """The base of both modes: registration, maintenance, the supervise loop."""

    def __init__(self, app: Flask, specs: t.Sequence[RunnerSpec]) -> None:
        super().__init__(app)
        self.specs = list(specs)
        self.interrupts = Interrupts()
        self._next_heartbeat = 0.0
        self._next_prune = 0.0
        self._stop_now = False

    @property
    def metadata(self) -> dict[str, t.Any]:
        return {"runners": ",".join(spec.label for spec in self.specs)}

    def run(self) -> None:
        """Supervise until stopped; in the main thread (it installs signal handlers)."""
        with self.app.app_context():
            self.interrupts.install()
            try:
                self.boot()
                self.maintain()
                for spec in self.specs:
                    self.start_runner(spec)
                self.loop()
            finally:
                self.stop_runners(immediately=self._stop_now)
                self.shutdown()
                self.interrupts.restore()

    def boot(self) -> None:
        # No heartbeat thread (see the module docstring): the loop heartbeats.
        self.register()
        logger.info(
            "SolidQ started %s %s (pid %s) %s",
            self.kind,
            self.name,
            self.pid,
            self.metadata["runners"],
        )

    def shutdown(self) -> None:
        self.release_supervisees()
        self.deregister()
        logger.info("SolidQ stopped %s %s (pid %s)", self.kind, self.name, self.pid)

    def loop(self) -> None:
        while not self.stopping:
            self.handle_interrupts(self.interrupts.wait(SUPERVISE_INTERVAL))
            if not self.stopping:
                self.check_runners()
                self.maintain()

    def handle_interrupts(self, arrived: t.Iterable[int]) -> None:
        """The first TERM or INT stops gracefully; QUIT, or a TERM or INT while stopping,
        stops at once. Each says so in the log."""
        for signum in arrived:
            if self._stop_now:
                continue
            if signum in GRACEFUL and not self.stopping:
                self.announce_graceful_stop(signum)
            else:
                self._stop_now = True
                self.announce_immediate_stop(signum)
            self.stop()

    def announce_graceful_stop(self, signum: int) -> None:
        """Say what the stop waits for: the running jobs (how many, which) and the shutdown
        timeout, and how to stop at once instead."""
        running = self.running_jobs()
        timeout = self.settings.shutdown_timeout
        if running == []:
            waits = "no jobs are running"
        else:
            jobs = "running jobs" if running is None else log_subscriber.describe_jobs(running)
            waits = (
                f"waiting up to {timeout:g} s (SOLIDQ_SHUTDOWN_TIMEOUT) for {jobs};"
                f" {interrupts_module.stop_now_hint(signum)}"
            )
        logger.info(
            "SolidQ %s %s received %s: stopping, %s",
            self.kind,
            self.name,
            interrupts_module.name(signum),
            waits,
            extra={
                "event": log_subscriber.LogEvent.STOPPING.value,
                "signal": interrupts_module.name(signum),
                "shutdown_timeout": timeout,
                "job_ids": None if running is None else [job.id for job in running],
            },
        )

    def announce_immediate_stop(self, signum: int) -> None:
        """Say the stop no longer waits (the jobs put back to ready are named once they are:
        :meth:`release_supervisees`)."""
        again = " again" if self.stopping and signum in GRACEFUL else ""
        logger.warning(
            "SolidQ %s %s received %s%s: stopping now; running jobs go back to ready",
            self.kind,
            self.name,
            interrupts_module.name(signum),
            again,
            extra={
                "event": log_subscriber.LogEvent.STOPPING_NOW.value,
                "signal": interrupts_module.name(signum),
            },
        )

    def running_jobs(self) -> list[JobRef] | None:
        """The jobs this supervisor's processes have claimed; None when it can't tell (the
        database can't be reached)."""
        if self.process_id is None:
            return None
        try:
            process_ids = [row.id for row in registry.supervisees(self.engine, self.process_id)]
            claimed = release.claimed_jobs(self.engine, process_ids) if process_ids else []
        except sa.exc.SQLAlchemyError:
            return None
        queued = self.queued_jobs()
        return [job for job in claimed if job.id not in queued]

    def queued_jobs(self) -> set[int]:
        """The jobs this supervisor's workers claimed ahead and haven't started, as far as it
        can tell (their start ledgers, in fork mode): not running, so not waited for."""
        return set()

    def wait_for_interrupts(self, timeout: float) -> bool:
        """While stopping: wait up to ``timeout`` seconds for an interrupt, and handle what
        arrives; return whether the stop is now immediate."""
        self.handle_interrupts(self.interrupts.wait(timeout))
        return self._stop_now

    def stop(self) -> None:
        super().stop()
        self.interrupts.wake()

    def maintain(self) -> None:
        """Heartbeat, and prune processes silent past the threshold, when each is due; then
        handle claims whose process is gone (a row deleted by hand, or claims a process made
        before this release checked its registration), so a live supervisor reaps them
        without waiting for a restart."""
        now = time.monotonic()
        self.heartbeat_if_due()
        if now < self._next_prune:
            return
        interval = min(
            self.settings.process_heartbeat_interval, self.settings.process_alive_threshold
        )
        self._next_prune = now + interval
        started = time.monotonic()
        try:
            for row in registry.prune_dead(
                self.engine,
                threshold=self.settings.process_alive_threshold,
                exclude=self.process_id,
                policy=self.settings.on_worker_death,
            ):
                logger.warning(
                    "SolidQ pruned %s %s (pid %s on %s)",
                    row.kind,
                    row.name,
                    row.pid,
                    row.hostname,
                )
            self.handle_orphaned_claims()
        except sa.exc.SQLAlchemyError as error:
            if not self.outage.failed(
                error, started=started, retry_every=interval, where=ThreadActivity.MAINTENANCE
            ):
                logger.warning("SolidQ supervisor maintenance failed; trying again", exc_info=True)
        else:
            self.outage.succeeded()

    def heartbeat_if_due(self) -> None:
        """Heartbeat when the interval has passed (the supervisor has no heartbeat thread; it
        calls this from its loop, and while it waits for its runners to stop)."""
        now = time.monotonic()
        if now < self._next_heartbeat or self.process_id is None:
            return
        interval = self.settings.process_heartbeat_interval
        self._next_heartbeat = now + interval
        try:
            self.heartbeat()
        except sa.exc.SQLAlchemyError as error:
            if not self.outage.failed(
                error, started=now, retry_every=interval, where=ThreadActivity.HEARTBEAT
            ):
                logger.warning("SolidQ supervisor heartbeat failed; trying again", exc_info=True)
        else:
            self.outage.succeeded()

    def handle_orphaned_claims(self) -> None:
        """Claims whose process row no longer exists (its process was deleted by hand, or
        died before any supervisor noticed) follow ``SOLIDQ_ON_WORKER_DEATH``."""
        for process_id in release.orphaned_process_ids(self.engine):
            count = release.handle_lost_claims(
                self.engine,
                [process_id],
                policy=self.settings.on_worker_death,
                error=registry.missing_error(process_id),
            )
            logger.warning("SolidQ handled %s claims of missing process %s", count, process_id)

    def release_supervisees(self) -> None:
        """Release the claims of this supervisor's processes that didn't deregister (quit or
        killed while stopping) and delete their rows: their jobs run again, and the log names
        them."""
        if self.process_id is None:
            return
        try:
            rows = registry.supervisees(self.engine, self.process_id)
            claimed = release.claimed_jobs(self.engine, [row.id for row in rows]) if rows else []
            for row in rows:
                registry.remove(self.engine, row, policy=OnWorkerDeath.RELEASE, error="")
        except sa.exc.SQLAlchemyError:
            logger.warning("SolidQ couldn't release the claims of stopped processes", exc_info=True)
            return
        if claimed:
            reason = "stopped at once" if self._stop_now else "their process didn't stop in time"
            who = f"{self.kind} {self.name}"
            log_subscriber.log_released(logger, who, reason, claimed, len(claimed))

    def handle_unexpected_exit(
        self,
        is_runner: t.Callable[[registry.ProcessRow], bool],
        label: str,
        description: str,
        never_started: t.Collection[int] = (),
    ) -> None:
        """A runner died on its own: the claims of its row (if it is still registered) on
        ``never_started`` jobs (its start ledger's) go back to ready, the others follow
        ``SOLIDQ_ON_WORKER_DEATH``, and the row goes."""
        logger.warning("SolidQ %s %s; replacing it", label, description)
        if self.process_id is None:
            return
        try:
            for row in registry.supervisees(self.engine, self.process_id):
                if is_runner(row):
                    self._release_never_started(row, label, never_started)
                    error = registry.exit_error(row, description)
                    registry.remove(
                        self.engine, row, policy=self.settings.on_worker_death, error=error
                    )
        except sa.exc.SQLAlchemyError:
            logger.warning("SolidQ couldn't handle the claims of a dead runner", exc_info=True)

    def _release_never_started(
        self, row: registry.ProcessRow, label: str, job_ids: t.Collection[int]
    ) -> None:
        """Put back to ready the dead runner's claims on ``job_ids`` (claimed ahead, never
        started): committed before the policy applies to the rest, so a crash in between
        leaves them ready, never failed."""
        released = release.release_never_started(
            self.engine, row.id, job_ids, reason=release.ReleaseReason.PROCESS_GONE
        )
        if released:
            log_subscriber.log_released(
                logger,
                f"{self.kind} {self.name}",
                f"{label} died before starting them",
                released,
                len(released),
            )

    def start_runner(self, spec: RunnerSpec) -> None:
        raise NotImplementedError

    def check_runners(self) -> None:
        raise NotImplementedError

    def stop_runners(self, *, immediately: bool) -> None:
        raise NotImplementedError


class ForkSupervisor(Supervisor):
    """Runs each runner in a forked child process."""

    kind = "Supervisor(fork)"

    def __init__(self, app: Flask, specs: t.Sequence[RunnerSpec]) -> None:
        super().__init__(app, specs)
        self.children: dict[int, RunnerSpec] = {}
        #: Each worker child's start ledger, by pid (see pool.StartLedger).
        self.ledgers: dict[int, StartLedger] = {}

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
            self.handle_unexpected_exit(
                functools.partial(_has_pid, pid=pid),
                f"{spec.label} (pid {pid})",
                _describe_status(status),
                never_started=ledger.listed() if ledger is not None else (),
            )
            if ledger is not None:
                ledger.close()
            self.start_runner(spec)

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


class ThreadSupervisor(Supervisor):
    """Runs every runner as a thread of this process."""

    kind = "Supervisor(thread)"

    def __init__(self, app: Flask, specs: t.Sequence[RunnerSpec]) -> None:
        super().__init__(app, specs)
        self.runners: dict[threading.Thread, tuple[RunnerSpec, Runnable]] = {}

    def start_runner(self, spec: RunnerSpec) -> None:
        runner = spec.build(self.app, self.process_id)
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
                self.handle_unexpected_exit(
                    functools.partial(_has_id, process_id=runner.process_id), spec.label, "stopped"
                )
                self.start_runner(spec)

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


def _has_pid(row: registry.ProcessRow, *, pid: int) -> bool:
    return row.pid == pid


def _has_id(row: registry.ProcessRow, *, process_id: int | None) -> bool:
    return row.id == process_id


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"
