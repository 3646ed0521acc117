"""The log lines a supervisor writes when it starts to stop: what the stop waits for, or that
it no longer waits. Each carries its event and fields for the JSON log format."""

from __future__ import annotations

import logging
import typing as t

from flask_solidq.logging.events import LogEvent
from flask_solidq.logging.fields import describe_jobs
from flask_solidq.processes import interrupts

if t.TYPE_CHECKING:
    from flask_solidq.operations.process_commands import ProcessCommand
    from flask_solidq.values import JobRef

logger = logging.getLogger("flask_solidq")


def graceful(who: str, signum: int, running: list[JobRef] | None, timeout: float) -> None:
    """Say what a stop on ``signum`` waits for: the ``running`` jobs (None: unknown) and the
    shutdown timeout, and how to stop at once instead."""
    if running == []:
        waits = "no jobs are running"
    else:
        jobs = "running jobs" if running is None else describe_jobs(running)
        waits = (
            f"waiting up to {timeout:g} s (SOLIDQ_SHUTDOWN_TIMEOUT) for {jobs};"
            f" {interrupts.stop_now_hint(signum)}"
        )
    logger.info(
        "SolidQ %s received %s: stopping, %s",
        who,
        interrupts.name(signum),
        waits,
        extra={
            "event": LogEvent.STOPPING.value,
            "signal": interrupts.name(signum),
            "shutdown_timeout": timeout,
            "job_ids": None if running is None else [job.id for job in running],
        },
    )


def immediate(who: str, signum: int, *, again: bool) -> None:
    """Say the stop no longer waits (the jobs put back to ready are named once they are)."""
    logger.warning(
        "SolidQ %s received %s%s: stopping now; running jobs go back to ready",
        who,
        interrupts.name(signum),
        " again" if again else "",
        extra={"event": LogEvent.STOPPING_NOW.value, "signal": interrupts.name(signum)},
    )


def commanded(who: str, command: ProcessCommand, timeout: float) -> None:
    """Say the operator's ``flask solidq stop`` (or the dashboard's Stop) stops ``who``."""
    logger.info(
        "SolidQ %s was told to stop: stopping, waiting up to %g s"
        " (SOLIDQ_SHUTDOWN_TIMEOUT) for running jobs",
        who,
        timeout,
        extra={
            "event": LogEvent.STOPPING.value,
            "signal": None,
            "command": command.value,
            "shutdown_timeout": timeout,
        },
    )
