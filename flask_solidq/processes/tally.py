"""What a ``flask solidq work --once`` worker performed: a count per way a run ended, kept in
memory its supervisor reads once the worker is done.

An anonymous shared ``mmap`` made before the supervisor forks the worker (as the
:class:`~flask_solidq.processes.pool.StartLedger` is), so the child's counts are in memory the
parent reads; in thread mode the same object is simply shared. Only the worker's finisher
thread writes, and the supervisor reads after the worker exited, so nothing needs a lock.
"""

from __future__ import annotations

import mmap
import struct
import typing as t

from flask_solidq.operations.outcomes import OutcomeKind

_KINDS = tuple(OutcomeKind)
_COUNTS = struct.Struct(f"<{len(_KINDS)}Q")
_DRAINED = struct.Struct("<Q")


class Tally:
    """Runs counted by :class:`~flask_solidq.operations.outcomes.OutcomeKind`, and whether the
    worker found nothing left to run (as opposed to being stopped, or dying)."""

    def __init__(self) -> None:
        self._memory = mmap.mmap(-1, _COUNTS.size + _DRAINED.size)

    def add_all(self, kinds: t.Iterable[OutcomeKind]) -> None:
        """Count one run per item of ``kinds`` (the finisher's thread only)."""
        counts = list(_COUNTS.unpack_from(self._memory, 0))
        for kind in kinds:
            counts[_KINDS.index(kind)] += 1
        _COUNTS.pack_into(self._memory, 0, *counts)

    def counts(self) -> dict[OutcomeKind, int]:
        """The runs counted, by how they ended (every kind, zeros included)."""
        return dict(zip(_KINDS, _COUNTS.unpack_from(self._memory, 0), strict=True))

    @property
    def drained(self) -> bool:
        """Whether the worker stopped because nothing it could run was ready or due."""
        return bool(_DRAINED.unpack_from(self._memory, _COUNTS.size)[0])

    def mark_drained(self) -> None:
        """Say the worker found nothing left to run (the worker's own thread)."""
        _DRAINED.pack_into(self._memory, _COUNTS.size, 1)

    def close(self) -> None:
        self._memory.close()


def total(tallies: t.Iterable[Tally]) -> dict[OutcomeKind, int]:
    """The counts of ``tallies`` summed, by kind."""
    summed = dict.fromkeys(_KINDS, 0)
    for tally in tallies:
        for kind, count in tally.counts().items():
            summed[kind] += count
    return summed
