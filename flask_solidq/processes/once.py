"""``flask solidq work --once``: the configured workers, under a supervisor as ``work`` runs
them, each working off what is due (see :mod:`~flask_solidq.processes.once_worker`); then a
report of what they performed and what is left waiting, and why.

The supervisor registers, prunes silent processes and handles TERM, INT and QUIT as it does
for ``work``; it replaces no worker, and stops once every worker has stopped. No dispatcher
process runs (each worker dispatches the due jobs itself) and no scheduler: recurring tasks
are left to ``flask solidq work``.

Exit status: 0 once the workers found nothing left to run, whatever became of the jobs (a
failed job is the queue's business, kept as a failed execution, and the report counts it);
``128 + N`` when signal N stopped the run first, as a shell reports it (130 for Ctrl-C, 143
for TERM); 1 when a worker died.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import typing as t

from flask_solidq import formatting
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.operations.queue_selector import QueueSelector
from flask_solidq.processes import interrupts
from flask_solidq.processes import launcher
from flask_solidq.processes import tally as tally_module
from flask_solidq.reads import leftovers
from flask_solidq.storage import database_clock
from flask_solidq.storage import db

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.config import Settings

logger = logging.getLogger("flask_solidq")

#: How the report names each way a run ended, in the order it lists them.
_ENDED = {
    OutcomeKind.FINISHED: "finished",
    OutcomeKind.RETRIED: "retried",
    OutcomeKind.DISCARDED: "discarded",
    OutcomeKind.FAILED: "failed (flask solidq jobs --state failed)",
    OutcomeKind.INTERRUPTED: "interrupted at a step, back to their queue",
    OutcomeKind.DEFERRED: "deferred by RateLimited",
}


@dataclasses.dataclass(frozen=True)
class OnceReport:
    """What a ``--once`` run performed and left."""

    #: Runs, by how each ended (a job retried and run again counts each run).
    performed: dict[OutcomeKind, int]
    left: leftovers.Leftovers
    #: The queues the run worked, as the workers' ``queues`` say them.
    queues: tuple[str, ...]
    now: dt.datetime
    #: The signal that stopped the run before its workers were done, if one did.
    interrupted_by: int | None = None
    #: The workers that died, each with how.
    lost: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        if self.lost:
            return 1
        if self.interrupted_by is not None:
            return 128 + self.interrupted_by
        return 0

    def render(self) -> str:
        lines = []
        if self.interrupted_by is not None:
            lines.append(
                f"Stopped by {interrupts.name(self.interrupted_by)} before the due jobs were"
                " all worked off."
            )
        if self.lost:
            who = "A worker" if len(self.lost) == 1 else "Workers"
            lines.append(
                f"{who} died before finding the work done: {'; '.join(self.lost)}. The jobs"
                " claimed follow SOLIDQ_ON_WORKER_DEATH."
            )
        lines.append(self._performed())
        lines.extend(self._left())
        return "\n".join(lines)

    def _performed(self) -> str:
        count = sum(self.performed.values())
        if not count:
            return (
                "Worked off no job: none was ready or due." if self._done else "Worked off no job."
            )
        ended = [
            f"{self.performed[kind]} {name}"
            for kind, name in _ENDED.items()
            if self.performed[kind]
        ]
        return f"Worked off {_jobs(count)}: {', '.join(ended)}."

    @property
    def _done(self) -> bool:
        return self.interrupted_by is None and not self.lost

    def _left(self) -> list[str]:
        left = self.left
        lines = [f"Left {_jobs(left.total)} waiting:" if left.total else "Left no job waiting."]
        if left.deferred.count:
            lines.append(
                f"  {_say(left.deferred.count, 'waits for its', 'wait for their')} rate limit,"
                f" {self._next(left.deferred)}:"
                " flask solidq jobs --state deferred"
            )
        if left.scheduled.count:
            lines.append(
                f"  {_say(left.scheduled.count, 'is', 'are')} scheduled later,"
                f" {self._next(left.scheduled)}: flask solidq jobs --state scheduled"
            )
        if left.blocked:
            lines.append(
                f"  {_say(left.blocked, 'waits', 'wait')} for a concurrency slot held elsewhere:"
                " flask solidq jobs --state blocked"
            )
        if left.paused:
            lines.append(
                f"  {_say(left.paused, 'is', 'are')} ready in a paused queue: flask solidq status"
                " lists the pauses, flask solidq resume QUEUE ends one"
            )
        if left.ready:
            why = "the stop came first" if not self._done else "enqueued after it last looked"
            lines.append(f"  {_say(left.ready, 'is', 'are')} ready ({why})")
        if left.running_elsewhere:
            lines.append(
                f"  {_say(left.running_elsewhere, 'runs', 'run')} in another process:"
                " flask solidq jobs --state claimed"
            )
        if left.other_queues:
            lines.append(
                f"Not its queues ({', '.join(self.queues)}):"
                f" {_jobs(left.other_queues)} ready, scheduled or blocked in others."
            )
        return lines

    def _next(self, waiting: leftovers.Waiting) -> str:
        """When the earliest of ``waiting`` is due (a deferred job's slot: the word the jobs
        lists use for both)."""
        at = t.cast(dt.datetime, waiting.next_at)
        when = formatting.format_when(at, self.now)
        return f"the next due at {at:%Y-%m-%d %H:%M:%S} UTC ({when})"


class OnceRun:
    """The configured workers (with ``overrides``), each to run until it found nothing left
    to run, or an interrupt stopped it.

    :raises ValueError: as :func:`~flask_solidq.processes.launcher.supervisor` does (``only``
        is refused: ``--once`` runs workers alone).
    """

    def __init__(
        self,
        app: Flask,
        *,
        mode: str,
        only: str | None = None,
        overrides: launcher.WorkerOverrides | None = None,
    ) -> None:
        overrides = overrides or launcher.WorkerOverrides()
        self.app = app
        self.settings: Settings = app.extensions["solidq"].settings
        self.supervisor = launcher.supervisor(
            app, mode=mode, only=only, overrides=overrides, once=True
        )
        self.workers = overrides.apply(self.settings.workers)

    def run(self) -> OnceReport:
        """Run the workers, then read what is left; in the app context, in the main thread
        (the supervisor installs signal handlers)."""
        _say_no_scheduler(self.settings)
        tallies = [spec.tally for spec in self.supervisor.specs if spec.tally is not None]
        try:
            self.supervisor.run()
            performed = tally_module.total(tallies)
        finally:
            for each in tallies:
                each.close()
        selectors = [QueueSelector(worker.queues) for worker in self.workers]
        with db.read(self.app.extensions["solidq"].engine) as connection:
            left = leftovers.read(connection, selectors)
            now = database_clock.now(connection)
        return OnceReport(
            performed=performed,
            left=left,
            queues=tuple(dict.fromkeys(name for each in selectors for name in each.queues)),
            now=now,
            interrupted_by=self.supervisor.interrupted_by,
            lost=tuple(self.supervisor.lost),
        )


def _say_no_scheduler(settings: Settings) -> None:
    if settings.recurring:
        logger.info(
            "SolidQ work --once runs no scheduler: the recurring tasks (%s) are enqueued by"
            " flask solidq work, not by this run",
            ", ".join(task.key for task in settings.recurring),
        )


def _jobs(count: int) -> str:
    return f"{count} job{'' if count == 1 else 's'}"


def _say(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"
