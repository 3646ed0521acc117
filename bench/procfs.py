"""What /proc says about the worker processes a benchmark started: their children, resident
memory and CPU time (Linux only; the benchmarks that use it say so)."""

from __future__ import annotations

import os

#: Clock ticks per second, the unit of utime and stime in /proc/<pid>/stat.
TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces), or None
    when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text[text.rindex(")") + 2 :].split()


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (a supervisor's forked workers, dispatcher, ...)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None and int(fields[1]) == pid:
            found.append(int(entry))
    return sorted(found)


def descendants(pid: int) -> list[int]:
    """``pid``'s children, their children, and so on."""
    found: list[int] = []
    todo = [pid]
    while todo:
        below = children(todo.pop())
        found += below
        todo += below
    return sorted(found)


def rss_kib(pid: int) -> int | None:
    """The process's resident set (VmRSS) in KiB, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds the process used so far (its threads included), or None."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds so far of ``pid`` and every process below it, the ones that
    already exited included: each live process counts its own time and its reaped children's
    (cutime, cstime), so a worker that ends between two readings still counts."""
    total = 0
    for each in [pid, *descendants(pid)]:
        fields = _stat_fields(each)
        if fields is not None:
            total += sum(int(field) for field in fields[11:15])
    return total / TICKS


def command_line(pid: int) -> str:
    """The process's title as ``ps`` shows it (a worker sets its own)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""
