"""A budget's recent admissions, second by second: a small ring kept in the budget's own row
(``solidq_rate_limits.admissions``), so the dashboard can draw a rate limit's admissions per
second against its limit.

The claim that admits a job already locks and rewrites its budget's row; the ring is one more
value of that same UPDATE (:func:`flask_solidq.controls.rate_limit.budgets.save`), never a
statement of its own. It holds the last :data:`SECONDS` seconds ending at the newest admission's
second, as
text: ``<newest second, Unix time>:<count of that second>,<of the one before>,...``, a zero
written as nothing and trailing zeros dropped (``1764680000:3,,1`` is 3 admissions at
1764680000 and 1 two seconds before). So an idle budget's ring is a dozen characters, and a busy
one's a few hundred at most.

Pure functions of the text and the clock, tested on their own.
"""

from __future__ import annotations

import collections
import datetime as dt
import math
import typing as t

#: How many seconds the ring remembers.
SECONDS = 180


def second_of(at: dt.datetime) -> int:
    """``at``'s whole second, in Unix time (a naive ``at`` is UTC, as stored)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.timezone.utc)
    return math.floor(at.timestamp())  # C arithmetic: a claim asks once per admission time


def parse(ring: str | None) -> tuple[int, list[int]]:
    """The newest second and the counts from it backwards; ``(0, [])`` for no ring, or for
    text that isn't one (a ring is only a picture: a bad one starts again)."""
    if not ring:
        return 0, []
    newest, _, counts = ring.partition(":")
    try:
        return int(newest), [int(count or 0) for count in counts.split(",")]
    except ValueError:
        return 0, []


def dump(newest: int, counts: list[int]) -> str | None:
    """The ring's text (None when it holds nothing)."""
    end = len(counts)
    while end and not counts[end - 1]:
        end -= 1
    if not end:
        return None
    return f"{newest}:" + ",".join([str(count) if count else "" for count in counts[:end]])


def record(ring: str | None, at: dt.datetime, count: int = 1) -> str | None:
    """``ring`` with ``count`` more admissions at ``at``'s second. A second older than the
    ring remembers is dropped."""
    return record_seconds(ring, {second_of(at): count})


def record_all(ring: str | None, admitted: t.Iterable[tuple[dt.datetime, int]]) -> str | None:
    """``ring`` with each ``(time, units)`` of ``admitted`` added (one unit per claim unless
    the limit counts units): the ring is read and written once, however many (a claim admits
    up to its batch at one time)."""
    at_times: dict[dt.datetime, int] = {}
    for at, units in admitted:  # a claim admits its batch at one time, or a few
        at_times[at] = at_times.get(at, 0) + units
    added: collections.Counter[int] = collections.Counter()
    for at, units in at_times.items():
        added[second_of(at)] += units
    return record_seconds(ring, added)


def record_seconds(ring: str | None, added: t.Mapping[int, int]) -> str | None:
    """``ring`` with ``added[second]`` more admissions in each second."""
    if not added:
        return ring
    if len(added) == 1:
        ((second, count),) = added.items()
        fast = _record_newest(ring, second, count)
        if fast is not None:
            return fast
    newest, counts = parse(ring)
    latest = max(added)
    if latest > newest:
        gap = latest - newest
        counts = [0] * SECONDS if gap >= SECONDS else [0] * gap + counts[: SECONDS - gap]
        newest = latest
    counts = counts + [0] * (SECONDS - len(counts))
    for second, count in added.items():
        if 0 <= newest - second < SECONDS:
            counts[newest - second] += count
    return dump(newest, counts)


def _record_newest(ring: str | None, second: int, count: int) -> str | None:
    """``ring`` with ``count`` more admissions in ``second`` when that is its newest second or
    later (every claim but one charged ahead out of order): edited as text, without parsing
    the counts (a claim would rewrite all of them for one changed number). None
    when the general path must do it (an older second, or text that isn't a ring)."""
    if not ring:
        return f"{second}:{count}" if count else None
    newest_text, colon, counts = ring.partition(":")
    if not colon or not newest_text.isdigit():
        return None
    gap = second - int(newest_text)
    if gap < 0:
        return None
    if gap == 0:
        head, comma, rest = counts.partition(",")
        if head and not head.isdigit():
            return None
        return f"{second}:{int(head or 0) + count}{comma}{rest}"
    if gap >= SECONDS:
        return f"{second}:{count}"
    shifted = f"{count}{',' * gap}{counts}"
    if shifted.count(",") >= SECONDS:  # more than SECONDS counts: the oldest drop out
        shifted = ",".join(shifted.split(",", SECONDS)[:SECONDS])
    return f"{second}:{shifted.rstrip(',')}"


def per_second(ring: str | None, until: dt.datetime, seconds: int = SECONDS) -> list[int]:
    """Admissions in each of the ``seconds`` seconds ending with ``until``'s, oldest first."""
    newest, counts = parse(ring)
    last = second_of(until)
    return [
        counts[newest - second] if 0 <= newest - second < len(counts) else 0
        for second in range(last - seconds + 1, last + 1)
    ]
