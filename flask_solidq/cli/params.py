"""The click parameter types of the ``flask solidq`` commands: every id, name, duration and
count is checked as it is parsed, before a command asks anything or reaches the database, by
the rule the dashboard uses too (:mod:`flask_solidq.identifiers`). A bad value is a usage
error (exit status 2) that names the value and says what is allowed."""

from __future__ import annotations

import math
import re
import typing as t

import click

from flask_solidq import identifiers

#: The largest count an option takes (``--batch-size``, ``--threads``...): a 32-bit INTEGER,
#: which a ``LIMIT`` takes on every database.
MAX_COUNT = 2**31 - 1

#: The longest duration an option takes, in seconds: a hundred years (365-day ones), far
#: inside what a ``timedelta`` and the databases' times hold.
MAX_SECONDS = 100 * 365 * 24 * 3600.0

_SIGNED_ASCII = re.compile(r"[-+]?[0-9]+")


def shown(text: str) -> str:
    """``text`` as an error message quotes it: shortened, so a huge value makes a short line."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


class RecordId(click.ParamType[int]):
    """The id of a row (a job's, a batch's): :data:`~flask_solidq.identifiers.ID_RULE`."""

    name = "id"

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        parsed = identifiers.parse_id(str(value))
        if parsed is None:
            self.fail(f"{shown(str(value))} is not a {self.kind} id: {identifiers.ID_RULE}.")
        return parsed


class JobReference(click.ParamType["int | str"]):
    """A job named by its ``provider_job_id`` (an id, as :class:`RecordId`) or its ``job_id``
    (text). Text written as a number (signed, or in other digits than 0-9) is refused: it
    can only be a mistyped id."""

    name = "job"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | str:
        text = str(value)
        if identifiers.has_nul(text):
            self.fail(f"{shown(text)} holds a NUL character (\\x00), which no job id has.")
        if not identifiers.looks_like_number(text):
            return text
        parsed = identifiers.parse_id(text)
        if parsed is None:
            self.fail(
                f"{shown(text)} is neither a provider_job_id ({identifiers.ID_RULE}) nor a"
                " job_id (a UUID)."
            )
        return parsed


class ProcessReference(click.ParamType["int | str"]):
    """A registered process named by its id (as :class:`RecordId`) or its name (as
    :class:`Name`), or the start of its name. Text written as a number is taken as an id (no
    process name is one) and refused when it can't be one."""

    name = "process"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | str:
        text = str(value)
        if identifiers.looks_like_number(text):
            parsed = identifiers.parse_id(text)
            if parsed is None:
                self.fail(f"{shown(text)} is not a process id: {identifiers.ID_RULE}.")
            return parsed
        problem = identifiers.name_problem(text, f"process name {shown(text)}")
        if problem is not None:
            self.fail(problem)
        return text


class Name(click.ParamType[str]):
    """A queue name, job name or other text stored in a ``VARCHAR(255)`` column: no NUL,
    at most :data:`~flask_solidq.identifiers.MAX_NAME_LENGTH` characters."""

    name = "name"

    def __init__(self, what: str) -> None:
        self.what = what

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        text = str(value)
        problem = identifiers.name_problem(text, f"{self.what} {shown(text)}")
        if problem is not None:
            self.fail(problem)
        return text


class Seconds(click.ParamType[float]):
    """A duration in seconds: a finite number from 0 (or above 0, with ``positive``) to
    :data:`MAX_SECONDS`."""

    name = "seconds"

    def __init__(self, *, positive: bool = False) -> None:
        self.positive = positive

    def convert(
        self, value: str | t.SupportsFloat, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            seconds = float(value) if str(value).isascii() else math.nan
        except (TypeError, ValueError):
            seconds = math.nan
        low = 0.0 < seconds if self.positive else 0.0 <= seconds
        if not (low and seconds <= MAX_SECONDS):  # NaN fails both comparisons
            lowest = "above 0" if self.positive else "from 0"
            self.fail(
                f"{shown(str(value))} is not a number of seconds: it takes a number {lowest} to"
                f" {MAX_SECONDS:.0f} (a hundred years)."
            )
        return seconds


class Count(click.IntRange):
    """A count: a whole number from ``minimum`` to :data:`MAX_COUNT`, in the digits 0-9
    (``int()`` would read other scripts' digits too)."""

    def __init__(self, minimum: int, maximum: int = MAX_COUNT) -> None:
        super().__init__(minimum, maximum)

    # Any: click's IntRange declares its input an int, though the command line gives text.
    def convert(
        self, value: t.Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, str) and not _SIGNED_ASCII.fullmatch(value.strip()):
            self.fail(
                f"{shown(value)} is not a whole number: it takes one from {self.min} to"
                f" {self.max}, in the digits 0-9."
            )
        return super().convert(value, param, ctx)


#: The types most options share.
JOB_REFERENCE = JobReference()
JOB_ID = RecordId("job")
PROCESS_REFERENCE = ProcessReference()
BATCH_ID = RecordId("batch")
QUEUE_NAME = Name("queue name")
JOB_NAME = Name("job name")
