"""How times, durations and tables read to a person: one set of words for the CLI's text and
the dashboard's pages, so ``in 4m10s`` means the same in both."""

from __future__ import annotations

import json
import typing as t

if t.TYPE_CHECKING:
    import datetime as dt


def format_when(moment: dt.datetime, now: dt.datetime) -> str:
    """When something comes: ``now``, or ``in 4m10s``."""
    remaining = (moment - now).total_seconds()
    if remaining <= 0:
        return "now"
    return f"in {remaining:.2f}s" if remaining < 1 else f"in {format_duration(remaining)}"


def format_table(
    headers: t.Sequence[str], rows: t.Sequence[t.Sequence[str]], right: t.Container[int] = ()
) -> str:
    """An indented table whose columns line up; the columns in ``right`` (numbers) align
    right. Trailing spaces are trimmed."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = []
    for cells in (headers, *rows):
        padded = [
            cell.rjust(width) if index in right else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        lines.append(("  " + "  ".join(padded)).rstrip())
    return "\n".join(lines)


def format_duration(seconds: float) -> str:
    """A short human duration: ``45s``, ``3m05s``, ``2h10m``, ``4d03h``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, seconds_left = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{seconds_left:02d}s"
    hours, minutes_left = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes_left:02d}m"
    days, hours_left = divmod(hours, 24)
    return f"{days}d{hours_left:02d}h"


def format_age(moment: dt.datetime, now: dt.datetime) -> str:
    """How long ago ``moment`` was: ``12s ago``."""
    return f"{format_duration(max(0.0, (now - moment).total_seconds()))} ago"


def format_expiry(moment: dt.datetime, now: dt.datetime) -> str:
    """When a lease runs out: ``in 4m10s``, or ``expired 12s ago``."""
    remaining = (moment - now).total_seconds()
    if remaining >= 0:
        return f"in {format_duration(remaining)}"
    return f"expired {format_duration(-remaining)} ago"


def count_of(count: int, units: bool, noun: str = "") -> str:
    """``count`` of a budget's admissions: ``90 units`` for a limit counted in units, else
    ``count`` of ``noun`` (``3 claims``; the bare number without a noun)."""
    if units:
        noun = "unit"
    elif not noun:
        return str(count)
    return f"{count} {noun}{'s' if count != 1 else ''}"


#: The longest metadata summary a list line shows (the batch's own page shows it whole).
METADATA_WIDTH = 60


def describe_metadata(metadata: t.Mapping[str, object]) -> str:
    """A batch's metadata on one line: its ``label`` when it has one (as in
    ``solidq.batch(..., label="catalog")``), else ``key=value, ...``; shortened to
    :data:`METADATA_WIDTH`."""
    label = metadata.get("label")
    if isinstance(label, str) and label:
        text = label
    else:
        text = ", ".join(
            f"{key}={json.dumps(value, default=str)}" for key, value in metadata.items()
        )
    text = " ".join(text.split())
    return text if len(text) <= METADATA_WIDTH else text[: METADATA_WIDTH - 1] + "…"


def format_short_duration(seconds: float) -> str:
    """A duration that may be short, for the job statistics: ``0.4ms``, ``42ms``, ``1.50s``,
    then as :func:`format_duration` from a minute on."""
    if seconds < 0.01:
        return f"{seconds * 1000:.1f}ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.2f}s"
    return format_duration(seconds)
