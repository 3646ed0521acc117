"""Validation helpers shared by the decorators that declare a job's options (``retry_on``,
``limits_rate``, ``coalesce``, ``limits_concurrency``...): each raises at decoration time with
a message naming the decorator and the option. Here, with the declarations, so the controls
(above) and the definitions' own rules share them without a circle."""

from __future__ import annotations

import typing as t

from flask_solidq.timing import to_seconds


def positive_int(value: object, *, option: str, decorator: str) -> int:
    """``value`` as a positive int, or a TypeError/ValueError naming ``decorator(option=)``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{decorator}({option}=) must be a positive int, not {value!r}.")
    if value < 1:
        raise ValueError(f"{decorator}({option}=) must be a positive int, not {value!r}.")
    return value


def positive_seconds(value: object, *, option: str, decorator: str) -> float:
    """``value`` (a timedelta or seconds) as positive float seconds."""
    return to_seconds(value, name=f"{decorator}({option}=)")


def choice(value: object, choices: t.Sequence[str], *, option: str, decorator: str) -> str:
    """``value`` if it is one of ``choices`` (strings, or their ``str`` enum members)."""
    if isinstance(value, str) and value in choices:
        return str(getattr(value, "value", value))
    options = ", ".join(repr(item) for item in choices)
    raise ValueError(f"{decorator}({option}=) must be one of {options}, not {value!r}.")
