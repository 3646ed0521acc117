"""How each kind of ``SOLIDQ_*`` value is read and checked: a wrong value raises
:class:`ValueError` or :class:`TypeError` naming the key, what it got and what it takes.
:mod:`flask_solidq.config` reads every key through these."""

from __future__ import annotations

import difflib
import enum
import logging
import typing as t

from flask_solidq.timing import to_seconds

logger = logging.getLogger("flask_solidq")

#: The prefix of flask-solidq's keys: an app key with it that flask-solidq doesn't read is
#: most likely a misspelling.
PREFIX = "SOLIDQ_"


def misspelled(config: t.Mapping[str, object], known: t.Collection[str]) -> list[str]:
    """A line for each ``SOLIDQ_*`` key of ``config`` that isn't in ``known``, naming the
    closest known key when one is close: a misspelled key would otherwise leave its setting
    at the default without a word."""
    lines = []
    for key in sorted(name for name in config if isinstance(name, str)):
        if key.startswith(PREFIX) and key not in known:
            line = f"{key} is not a flask-solidq setting"
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
            lines.append(
                f"{line}; did you mean {close[0]}?" if close else f"{line}; it is ignored."
            )
    return lines


def warn_misspelled(config: t.Mapping[str, object], known: t.Collection[str]) -> None:
    """Log a warning for each key :func:`misspelled` finds (once, when the app is set up)."""
    for line in misspelled(config, known):
        logger.warning("SolidQ: %s", line)


def known_keys(
    values: dict[str, object], defaults: t.Mapping[str, object], name: str
) -> dict[str, object]:
    unknown = sorted(set(values) - set(defaults))
    if unknown:
        raise ValueError(f"{name} has unknown keys {unknown}; it takes {sorted(defaults)}.")
    return values


def list_of_dicts(config: t.Mapping[str, object], key: str) -> list[dict[str, object]]:
    value = config[key]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, dict) for item in value):
        raise TypeError(f"{key} must be a list of dicts, not {value!r}.")
    return list(value)


def positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {value!r}.")
    if value < 1:
        raise ValueError(f"{name} must be 1 or more, not {value}.")
    return value


def non_negative_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {value!r}.")
    if value < 0:
        raise ValueError(f"{name} must be 0 or more, not {value}.")
    return value


def seconds(config: t.Mapping[str, object], key: str, *, allow_zero: bool = False) -> float:
    return to_seconds(config[key], name=key, allow_zero=allow_zero)


def optional_seconds(config: t.Mapping[str, object], key: str) -> float | None:
    """A duration, or None for "off"."""
    value = config[key]
    if value is None:
        return None
    try:
        return to_seconds(value, name=key)
    except ValueError as error:
        raise ValueError(f"{error} Use None to turn it off.") from None


def boolean(config: t.Mapping[str, object], key: str) -> bool:
    value = config[key]
    if not isinstance(value, bool):
        raise TypeError(f"{key} must be True or False, not {value!r}.")
    return value


def optional_callable(
    config: t.Mapping[str, object], key: str
) -> t.Callable[[BaseException], object] | None:
    value = config[key]
    if value is None:
        return None
    if not callable(value):
        raise TypeError(
            f"{key} must be None or a callable given the exception (such as"
            f" sentry_sdk.capture_exception), not {value!r}."
        )
    return value


E = t.TypeVar("E", bound=enum.Enum)


def choice(config: t.Mapping[str, object], key: str, choices: type[E]) -> E:
    """The member of ``choices`` whose value the key holds (a member itself is taken too)."""
    value = config[key]
    try:
        return choices(value)
    except ValueError:
        options = ", ".join(repr(choice.value) for choice in choices)
        raise ValueError(f"{key} must be one of {options}, not {value!r}.") from None


def optional_str(config: t.Mapping[str, object], key: str) -> str | None:
    value = config[key]
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"{key} must be None or the name of a bind, not {value!r}.")
    return value


#: The values ``SOLIDQ_DATABASE_POOLER`` takes besides None.
POOLERS = ("pgbouncer",)


def pooler(config: t.Mapping[str, object], key: str) -> str | None:
    value = config[key]
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in POOLERS:
        raise ValueError(
            f"{key} must be None (connected directly) or 'pgbouncer' (through PgBouncer, in"
            f" transaction or session pooling), not {value!r}."
        )
    return value.lower()


def listen_url(config: t.Mapping[str, object], key: str) -> str | None:
    """A database URL, kept as text with its password (the listener connects with it)."""
    value = config[key]
    if value is None:
        return None
    rendered = getattr(value, "render_as_string", None)
    if rendered is not None:
        value = rendered(hide_password=False)
    if not isinstance(value, str) or "://" not in value:
        raise TypeError(
            f"{key} must be None or the URL of the queue's PostgreSQL database reached"
            f" directly, past the pooler (such as 'postgresql+psycopg://user:pw@db-host:5432/app'),"
            f" not {value!r}."
        )
    if config.get("SOLIDQ_DATABASE_POOLER") is None:
        raise ValueError(
            f"{key} is set but SOLIDQ_DATABASE_POOLER is not: connected directly, the queue"
            " listens on its own connections; set SOLIDQ_DATABASE_POOLER = 'pgbouncer' if"
            f" it goes through PgBouncer, or remove {key}."
        )
    return value


def url_prefix(config: t.Mapping[str, object], key: str) -> str:
    value = config[key]
    if not isinstance(value, str) or not value.startswith("/"):
        raise ValueError(
            f'{key} must be a path starting with "/", such as "/solidq", not {value!r}.'
        )
    return value.rstrip("/") or "/"


def basic_auth(config: t.Mapping[str, object], key: str) -> tuple[str, str] | None:
    value = config[key]
    if value is None:
        return None
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not all(isinstance(part, str) and part for part in value)
    ):
        raise TypeError(f'{key} must be None or ("user", "password"), not {value!r}.')
    return (value[0], value[1])


def words(config: t.Mapping[str, object], key: str) -> tuple[str, ...]:
    """A list or tuple of non-empty strings (empty: none)."""
    value = config[key]
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(word, str) and word.strip() for word in value
    ):
        raise TypeError(
            f'{key} must be a list of non-empty strings, such as ["password", "token"]'
            f" (or [] for none), not {value!r}."
        )
    return tuple(dict.fromkeys(word.strip() for word in value))
