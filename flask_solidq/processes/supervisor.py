"""The supervisor: starts the configured processes, watches them, replaces those that die,
prunes processes gone silent anywhere, and stops everything on TERM, INT or QUIT.

What both modes share is here (:class:`RunnerSpec`, :class:`Supervisor`: its process row and
heartbeats, pruning, the signals, the shutdown, a dead runner's claims); how a runner runs is a
mode's: :mod:`~flask_solidq.processes.forks` (an OS process each, the default) or
:mod:`~flask_solidq.processes.threads` (threads of this process, for development and tests).
In fork mode the supervisor keeps no threads, so forking never copies a held lock.

* TERM / INT stop gracefully: workers stop claiming, wait up to ``SOLIDQ_SHUTDOWN_TIMEOUT``
  for running jobs and release the rest back to ready. QUIT, or a second TERM / INT, stops at
  once, releasing the claims of processes that had no time to clean up.
* ``flask solidq stop`` / ``quiet`` (or the dashboard's buttons) are read from the database
  about once a second (:mod:`~flask_solidq.processes.commands`): a stopped supervisor stops as
  on TERM, a stopped runner is TERMed and not replaced, a quiet worker claims no more jobs.
* A child that exits unexpectedly is replaced, after its claims follow
  ``SOLIDQ_ON_WORKER_DEATH``; in fork mode the jobs it claimed ahead and never started go back
  to ready first. A worker lost where no supervisor sees it die is pruned for silence.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
import typing as t

import sqlalchemy as sa

from flask_solidq.operations import processes as process_roll
from flask_solidq.operations import release
from flask_solidq.operations.process_commands import ProcessCommand
from flask_solidq.processes import job_stats
from flask_solidq.processes import runner_claims
from flask_solidq.processes import stop_lines
from flask_solidq.processes.base import Runnable
from flask_solidq.processes.commands import CommandWatch
from flask_solidq.processes.interrupts import GRACEFUL
from flask_solidq.processes.interrupts import Interrupts
from flask_solidq.processes.thread_errors import ThreadActivity
from flask_solidq.timing import utcnow
from flask_solidq.values import JSONValue

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.operations.process_commands import Order
    from flask_solidq.processes.tally import Tally
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
    #: A ``--once`` worker's tally: what it performed, and whether it found nothing left.
    tally: Tally | None = None


class Supervisor(Runnable):
    """The base of both modes: registration, maintenance, the supervise loop."""

    def __init__(self, app: Flask, specs: t.Sequence[RunnerSpec], *, once: bool = False) -> None:
        super().__init__(app)
        self.specs = list(specs)
        #: ``work --once``: a runner that ends is not replaced, and the supervisor stops
        #: once none is left.
        self.once = once
        self.interrupts = Interrupts()
        self._next_heartbeat = 0.0
        self._next_prune = 0.0
        self._stop_now = False
        #: The interrupt that asked this supervisor to stop, if one did.
        self.interrupted_by: int | None = None
        #: ``--once``: the runners that ended without finding their work done (died).
        self.lost: list[str] = []
        #: The operator's commands for this tree, read from the database (commands.py).
        self.commands = CommandWatch()
        #: Told to quiet: the workers it starts from now on start quiet.
        self.quieted = False

    @property
    def metadata(self) -> dict[str, JSONValue]:
        runners: dict[str, JSONValue] = {"runners": ",".join(spec.label for spec in self.specs)}
        return {**runners, "once": True} if self.once else runners

    @property
    def who(self) -> str:
        """The supervisor as its log lines name it: its kind and name."""
        return f"{self.kind} {self.name}"

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
                self.obey_commands()
                if self.once and not self.has_runners():
                    self.stop()

    def obey_commands(self) -> None:
        """Read the operator's commands for this tree when due, and carry out the new ones:
        stop or quiet itself, or hand a runner its command (:meth:`command_runner`)."""
        if self.process_id is None or not self.commands.due():
            return
        started = time.monotonic()
        try:
            orders = self.commands.new_orders(self.engine, self.process_id)
        except sa.exc.SQLAlchemyError as error:
            interval = self.commands.interval
            self._failed(
                error, "reading process commands", started, interval, ThreadActivity.MAINTENANCE
            )
            return
        self.outage.succeeded()
        for order in orders:
            if order.process_id == self.process_id:
                self.obey(order.command)
            else:
                self.command_runner(order)

    def obey(self, command: ProcessCommand) -> None:
        """Carry out a command given to the supervisor itself: stop gracefully, as on TERM
        (its runners stop and are not replaced), or start its future workers quiet (its
        running workers have the command on their own rows)."""
        if command is ProcessCommand.QUIET:
            self.quieted = True
            logger.info("SolidQ %s %s was told to quiet its workers", self.kind, self.name)
            return
        stop_lines.commanded(self.who, command, self.settings.shutdown_timeout)
        self.stop()

    def handle_interrupts(self, arrived: t.Iterable[int]) -> None:
        """The first TERM or INT stops gracefully; QUIT, or a TERM or INT while stopping,
        stops at once. Each says so in the log."""
        for signum in arrived:
            if self._stop_now:
                continue
            if self.interrupted_by is None:
                self.interrupted_by = signum
            if signum in GRACEFUL and not self.stopping:
                self.announce_graceful_stop(signum)
            else:
                self._stop_now = True
                self.announce_immediate_stop(signum)
            self.stop()

    def announce_graceful_stop(self, signum: int) -> None:
        """Say what the stop waits for (see :func:`stop_lines.graceful`)."""
        timeout = self.settings.shutdown_timeout
        stop_lines.graceful(self.who, signum, self.running_jobs(), timeout)

    def announce_immediate_stop(self, signum: int) -> None:
        """Say the stop no longer waits (the jobs put back to ready are named once they are:
        :meth:`release_supervisees`)."""
        again = self.stopping and signum in GRACEFUL
        stop_lines.immediate(self.who, signum, again=again)

    def running_jobs(self) -> list[JobRef] | None:
        """The jobs this supervisor's processes have claimed; None when it can't tell (the
        database can't be reached)."""
        if self.process_id is None:
            return None
        try:
            process_ids = [row.id for row in process_roll.supervisees(self.engine, self.process_id)]
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
        without waiting for a restart; and delete the job statistics past their retention."""
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
            for row in process_roll.prune_dead(
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
            self.prune_job_stats()
        except sa.exc.SQLAlchemyError as error:
            self._failed(error, "maintenance", started, interval, ThreadActivity.MAINTENANCE)
        else:
            self.outage.succeeded()

    def _failed(
        self,
        error: sa.exc.SQLAlchemyError,
        what: str,
        started: float,
        retry_every: float,
        where: ThreadActivity,
    ) -> None:
        """A database step begun at ``started`` failed: an outage is said once, by the
        outage's own lines; any other error each time, with its traceback."""
        if not self.outage.failed(error, started=started, retry_every=retry_every, where=where):
            logger.warning("SolidQ supervisor %s failed; trying again", what, exc_info=True)

    def prune_job_stats(self) -> None:
        """Delete the minutes of ``solidq_job_stats`` older than ``SOLIDQ_STATS_RETENTION``,
        and fold those older than a day into hours (with the pruning of dead processes: every
        heartbeat interval)."""
        now = utcnow()
        job_stats.prune(
            self.engine, before=now - dt.timedelta(seconds=self.settings.stats_retention)
        )
        job_stats.compact(self.engine, now=now)

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
            self._failed(error, "heartbeat", now, interval, ThreadActivity.HEARTBEAT)
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
                error=process_roll.missing_error(process_id),
            )
            logger.warning("SolidQ handled %s claims of missing process %s", count, process_id)

    def release_supervisees(self) -> None:
        """Release the claims of this supervisor's processes that didn't deregister (see
        :func:`runner_claims.release_supervisees`)."""
        if self.process_id is not None:
            reason = "stopped at once" if self._stop_now else "their process didn't stop in time"
            runner_claims.release_supervisees(self.engine, self.process_id, self.who, reason)

    def handle_unexpected_exit(
        self,
        is_runner: t.Callable[[process_roll.ProcessRow], bool],
        label: str,
        description: str,
        never_started: t.Collection[int] = (),
        *,
        stopped: bool = False,
    ) -> None:
        """A runner died on its own (or, ``stopped``, ended after the operator's stop
        command): the claims of its row (if it is still registered) on ``never_started``
        jobs (its start ledger's) go back to ready, the others follow
        ``SOLIDQ_ON_WORKER_DEATH``, and the row goes."""
        if stopped:
            logger.info("SolidQ %s %s after the stop command; not replacing it", label, description)
        else:
            then = "not replaced (--once)" if self.once else "replacing it"
            logger.warning("SolidQ %s %s; %s", label, description, then)
        if self.process_id is not None:
            runner_claims.handle_dead_runner(
                self.engine,
                self.process_id,
                is_runner,
                who=self.who,
                label=label,
                description=description,
                never_started=never_started,
                policy=self.settings.on_worker_death,
            )

    def is_done(self, spec: RunnerSpec) -> bool:
        """Whether the runner of ``spec``, which ended, had finished its work: a ``--once``
        worker that found nothing left to run (its tally says so)."""
        return self.once and spec.tally is not None and spec.tally.drained

    def after_unexpected_exit(self, spec: RunnerSpec, label: str) -> None:
        """Start a replacement; under ``--once``, note the runner as lost instead."""
        if self.once:
            self.lost.append(label)
        else:
            self.start_runner(spec)

    # What each mode does its own way (forks.ForkSupervisor, threads.ThreadSupervisor):

    def has_runners(self) -> bool:
        """Whether any runner is still running (or not yet reaped)."""
        raise NotImplementedError

    def start_runner(self, spec: RunnerSpec) -> None:
        """Start one runner of ``spec``."""
        raise NotImplementedError

    def check_runners(self) -> None:
        """Notice the runners that ended on their own, handle their claims
        (:meth:`handle_unexpected_exit`) and start their replacements."""
        raise NotImplementedError

    def stop_runners(self, *, immediately: bool) -> None:
        """Stop the runners: gracefully unless ``immediately``."""
        raise NotImplementedError

    def command_runner(self, order: Order) -> None:
        """Hand the runner ``order`` names its command, if it is one of this supervisor's:
        a stopped runner is not replaced."""
        raise NotImplementedError
