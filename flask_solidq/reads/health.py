"""Whether this host's workers are alive, for ``flask solidq health`` (container and systemd
probes): a supervisor registered on the host heartbeats within the alive threshold, and so
does every process it supervises.

Ages are measured on the database's clock, read in the same transaction as the rows, so a
probe on a host whose clock drifts judges the heartbeats as the supervisors that prune silent
processes do. The rows come from :func:`flask_solidq.operations.processes.process_rows` (the
process roll is a few rows per host), filtered here.

A silent supervisor on the host is no problem while another one there is alive: a supervisor
restarted on the same host (a container restart keeps its hostname, and often its pid 1)
leaves its old row behind until a supervisor prunes it, up to a heartbeat interval after the
threshold.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

import sqlalchemy as sa

from flask_solidq.operations.processes import process_rows
from flask_solidq.reads.process_row import ProcessRow
from flask_solidq.storage import database_clock
from flask_solidq.values import JSONValue
from flask_solidq.values import ProcessKind


class Verdict(enum.IntEnum):
    """The exit status of ``flask solidq health``."""

    #: A live supervisor on the host, and all its processes live.
    HEALTHY = 0
    #: No supervisor on the host, or one of them (or a process of theirs) went silent.
    UNHEALTHY = 1
    #: The check couldn't be made: the database can't be reached, or has no tables. Not 2,
    #: which Docker reserves and click uses for usage errors; 3 is "unknown" to Nagios too.
    UNKNOWN = 3


@dataclasses.dataclass(frozen=True)
class ProcessHealth:
    """One registered process and how long it has been silent, by the database's clock."""

    id: int
    kind: str
    name: str
    pid: int
    hostname: str | None
    supervisor_id: int | None
    silent_seconds: float
    alive: bool

    def describe(self) -> str:
        """``Worker worker-ab12... (pid 42)``: the process as log lines name it."""
        return f"{self.kind} {self.name} (pid {self.pid})"

    def as_dict(self) -> dict[str, JSONValue]:
        return {
            "kind": self.kind,
            "name": self.name,
            "pid": self.pid,
            "silent_seconds": round(self.silent_seconds, 3),
            "alive": self.alive,
        }


@dataclasses.dataclass(frozen=True)
class SupervisorHealth:
    """A supervisor on the host and the processes it started."""

    supervisor: ProcessHealth
    processes: list[ProcessHealth]

    @property
    def silent_processes(self) -> list[ProcessHealth]:
        return [process for process in self.processes if not process.alive]

    def as_dict(self) -> dict[str, JSONValue]:
        return {
            **self.supervisor.as_dict(),
            "processes": [process.as_dict() for process in self.processes],
        }


@dataclasses.dataclass(frozen=True)
class Report:
    """What ``flask solidq health`` found: the verdict, the one line saying what is wrong
    (or what is fine), and the supervisors it looked at."""

    verdict: Verdict
    message: str
    hostname: str
    threshold: float
    checked_at: dt.datetime
    supervisors: list[SupervisorHealth]

    def as_dict(self) -> dict[str, JSONValue]:
        """The report as ``--json`` prints it."""
        return {
            "healthy": self.verdict is Verdict.HEALTHY,
            "message": self.message,
            "hostname": self.hostname,
            "threshold_seconds": self.threshold,
            "checked_at": self.checked_at.isoformat(),
            "supervisors": [supervisor.as_dict() for supervisor in self.supervisors],
        }


def check_host(
    connection: sa.Connection,
    *,
    hostname: str,
    threshold: float,
    supervisor_pid: int | None = None,
) -> Report:
    """Judge the supervisors registered on ``hostname`` (those of ``supervisor_pid`` only,
    when given) and their processes: healthy when one of them heartbeat within ``threshold``
    seconds and every process of each live one did too."""
    now = database_clock.now(connection)
    rows = [_process_health(row, now, threshold) for row in process_rows(connection)]
    candidates = [
        row
        for row in rows
        if _is_supervisor(row)
        and row.hostname == hostname
        and (supervisor_pid is None or row.pid == supervisor_pid)
    ]
    supervisors = [
        SupervisorHealth(row, [other for other in rows if other.supervisor_id == row.id])
        for row in sorted(candidates, key=lambda row: row.silent_seconds)
    ]
    verdict, message = _judge(supervisors, rows, hostname, threshold, supervisor_pid)
    return Report(verdict, message, hostname, threshold, now, supervisors)


def _process_health(row: ProcessRow, now: dt.datetime, threshold: float) -> ProcessHealth:
    silent = max(0.0, (now - row.last_heartbeat_at).total_seconds())
    return ProcessHealth(
        row.id,
        row.kind,
        row.name,
        row.pid,
        row.hostname,
        row.supervisor_id,
        silent,
        silent <= threshold,
    )


def _is_supervisor(process: ProcessHealth) -> bool:
    return ProcessKind.is_supervisor(process.kind)


def _judge(
    supervisors: list[SupervisorHealth],
    rows: list[ProcessHealth],
    hostname: str,
    threshold: float,
    supervisor_pid: int | None,
) -> tuple[Verdict, str]:
    """The verdict and its one line. ``supervisors`` come freshest first."""
    if not supervisors:
        return Verdict.UNHEALTHY, _no_supervisor(rows, hostname, supervisor_pid)
    live = [entry for entry in supervisors if entry.supervisor.alive]
    if not live:
        return Verdict.UNHEALTHY, _silent(supervisors[0].supervisor, threshold, hostname)
    silent = [(entry, process) for entry in live for process in entry.silent_processes]
    if silent:
        entry, process = max(silent, key=lambda pair: pair[1].silent_seconds)
        of = f" of {entry.supervisor.name}"
        return Verdict.UNHEALTHY, _silent(process, threshold, hostname, of)
    return Verdict.HEALTHY, _healthy(live, hostname, threshold)


def _healthy(live: list[SupervisorHealth], hostname: str, threshold: float) -> str:
    counted = sum(len(entry.processes) for entry in live)
    names = " and ".join(entry.supervisor.describe() for entry in live)
    whose = "its" if len(live) == 1 else "their"
    return (
        f"healthy: {names} on {hostname} and {whose} {counted} process"
        f"{'' if counted == 1 else 'es'} heartbeat within {_seconds(threshold)}"
    )


def _no_supervisor(rows: list[ProcessHealth], hostname: str, supervisor_pid: int | None) -> str:
    wanted = "no supervisor" + ("" if supervisor_pid is None else f" with pid {supervisor_pid}")
    hosts = sorted({row.hostname or "?" for row in rows if _is_supervisor(row)})
    elsewhere = f" (supervisors are registered on: {', '.join(hosts[:5])})" if hosts else ""
    return (
        f"unhealthy: {wanted} is registered on host {hostname!r}{elsewhere}; is `flask solidq"
        " work` running here, and is --hostname this host's name as the workers see it?"
    )


def _silent(process: ProcessHealth, threshold: float, hostname: str, of: str = "") -> str:
    return (
        f"unhealthy: {process.describe()}{of} on {hostname} has been silent for"
        f" {_seconds(process.silent_seconds)} (threshold {_seconds(threshold)})"
    )


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
