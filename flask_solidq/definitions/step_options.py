"""How a job declares its steps' options: ``max_resumptions`` and ``resume_errors``, checked
where they are declared (a class keyword or attribute, ``@solidq.job(...)``)."""

from __future__ import annotations

import enum


class Default(enum.Enum):
    """``max_resumptions``' default: take ``SOLIDQ_MAX_RESUMPTIONS``."""

    CONFIG = "config"


def check_max_resumptions(value: object, *, where: str) -> int | None | Default:
    """``max_resumptions=`` as declared: an int of 0 or more, None (no limit) or the default.

    :raises ValueError: anything else; the message names ``where``.
    """
    if value is None or value is Default.CONFIG:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"{where} must be an int of 0 or more, or None for no limit, not {value!r}."
        )
    return value


def check_resume_errors(value: object, *, where: str) -> tuple[type[Exception], ...]:
    """``resume_errors`` as declared: a tuple of exception classes.

    :raises TypeError: anything else; the message names ``where``.
    """
    if not isinstance(value, tuple) or not all(
        isinstance(item, type) and issubclass(item, Exception) for item in value
    ):
        raise TypeError(
            f"{where} must be a tuple of exception classes (subclasses of Exception),"
            f" not {value!r}."
        )
    return value
