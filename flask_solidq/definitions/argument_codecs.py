"""The codecs of the stored forms that hold a single value, and what every codec shares.

Each ``dump_*`` function turns a value of one exact type into its tagged form, and each
``load_*`` function turns the tagged form back; :mod:`flask_solidq.definitions.argument_values`
picks which one runs. The forms themselves are described in
:mod:`flask_solidq.definitions.arguments`.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import enum
import reprlib
import typing as t
import uuid
import zoneinfo

from flask_solidq import argument_filter
from flask_solidq.definitions import import_paths
from flask_solidq.errors import DeserializationError
from flask_solidq.values import JSONValue

#: A value's stored form when it is a dict: a tagged form, or a plain dict with ``str`` keys.
Stored = dict[str, JSONValue]

#: A dump function: it takes a value of the exact type it is registered under, which a
#: table of them (keyed by ``type``) can't say, hence ``Any``.
Dumper = t.Callable[[t.Any], JSONValue]

#: A load function of a tagged form.
Loader = t.Callable[[Stored], object]

_T = t.TypeVar("_T")
_Zoned = t.TypeVar("_Zoned", dt.datetime, dt.time)

#: The key that marks a dict as a tagged form.
TAG = "_sq"

# Beyond this magnitude an int is stored in hex: Python refuses to convert ints of more than
# ``sys.get_int_max_str_digits()`` decimal digits (at least 640) to or from text.
_BIG_INT = 1 << 2000

_NON_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


class Unserializable(Exception):
    """Raised inside the dump functions; the path is built while it propagates, so the fast
    path never formats one."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[str] = []


def type_name(cls: type) -> str:
    """``cls``'s dotted name for messages; just the name for a builtin."""
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def check_importable(cls: type, what: str) -> None:
    """Refuse to store ``what`` (``"an enum member"``) of a class that can't be imported back.

    :raises Unserializable: ``cls``'s import path doesn't lead back to ``cls``.
    """
    path = import_paths.import_path(cls)
    try:
        found = import_paths.load_import_path(path)
    except import_paths.ImportPathError:
        found = None
    if found is not cls:
        raise Unserializable(
            f"it is {what} of class {type_name(cls)}, which can't be imported back by name"
            + (" (it is defined inside a function)" if "<locals>" in path else "")
            + ". Define the class at the top level of a module."
        )


def shown_repr(value: JSONValue) -> str:
    """A short repr of a stored value for an error message, with what
    ``SOLIDQ_FILTER_ARGUMENTS`` hides filtered: the message is stored with a failed job and
    shown by the dashboard and the CLI."""
    return reprlib.repr(argument_filter.current().filtered(value))


def field(value: Stored, key: str, cls: type[_T]) -> _T:
    """``value[key]``, checked to be a ``cls``, for the loaders that run outside the
    malformed-data conversion in :func:`~flask_solidq.definitions.argument_values.load_tagged`.
    """
    found = value.get(key)
    if type(found) is not cls or not isinstance(found, cls):
        raise DeserializationError(
            f"The stored {value.get(TAG)} {shown_repr(value)} is malformed: {key!r} should be"
            f" a {cls.__name__}."
        )
    return found


def load_class(path: str, what: str) -> object:
    """Import the class of a stored ``what`` (``"enum member"``) from ``path``.

    :raises ~flask_solidq.errors.DeserializationError: ``path`` doesn't resolve.
    """
    try:
        return import_paths.load_import_path(path)
    except import_paths.ImportPathError as exc:
        raise DeserializationError(f"Can't load a stored {what}: {exc}") from exc


def encodable(text: str) -> bool:
    """Whether ``text`` can be stored as UTF-8 text: it holds no lone surrogate (such as
    ``"\\ud800"``, which :func:`json.dumps` writes as it is and every database's driver
    then refuses). Cheap for ASCII text, the usual case."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def surrogate_reason(text: str) -> str:
    """Why ``text`` can't be stored, for a string :func:`encodable` refused. Names the code
    point and its index, not the text (it may be personal data)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"it is a string with a lone surrogate (U+{ord(text[exc.start]):04X} at index"
            f" {exc.start}), which can't be stored as UTF-8 text. Decode the bytes it came"
            " from with errors='replace', or pass them as bytes."
        )
    return "it is a string that can't be stored as UTF-8 text."  # pragma: no cover


def _dump_str(value: str) -> str:
    if value.isascii() or encodable(value):
        return value
    raise Unserializable(surrogate_reason(value))


def _dump_int(value: int) -> JSONValue:
    if -_BIG_INT < value < _BIG_INT:
        return value
    return {TAG: "int", "v": hex(value)}


def _dump_float(value: float) -> JSONValue:
    if value - value == 0.0:  # False for NaN and the infinities only.
        return value
    return {TAG: "float", "v": repr(value)}


def _dump_bytes(value: bytes) -> Stored:
    return {TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}


def _dump_bytearray(value: bytearray) -> Stored:
    return {TAG: "bytearray", "v": base64.b64encode(value).decode("ascii")}


def _zoned(out: Stored, value: dt.datetime | dt.time) -> Stored:
    tzinfo = value.tzinfo
    if isinstance(tzinfo, zoneinfo.ZoneInfo) and tzinfo.key is not None:
        out["tz"] = tzinfo.key
    if value.fold:
        out["fold"] = 1
    return out


def _dump_datetime(value: dt.datetime) -> Stored:
    return _zoned({TAG: "datetime", "v": value.isoformat()}, value)


def _dump_date(value: dt.date) -> Stored:
    return {TAG: "date", "v": value.isoformat()}


def _dump_time(value: dt.time) -> Stored:
    return _zoned({TAG: "time", "v": value.isoformat()}, value)


def _dump_timedelta(value: dt.timedelta) -> Stored:
    return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}


def _dump_decimal(value: decimal.Decimal) -> Stored:
    return {TAG: "decimal", "v": str(value)}


def _dump_uuid(value: uuid.UUID) -> Stored:
    return {TAG: "uuid", "v": str(value)}


def dump_enum(value: enum.Enum, dump_part: t.Callable[[object], JSONValue]) -> Stored:
    """The ``enum`` form of ``value``, a flag combination's value stored with ``dump_part``."""
    cls = type(value)
    name = value._name_
    if name is not None and cls.__members__.get(name) is value:
        return {TAG: "enum", "cls": import_paths.import_path(cls), "n": name}
    try:  # A flag combination: no single member has its name.
        return {TAG: "enum", "cls": import_paths.import_path(cls), "v": dump_part(value._value_)}
    except Unserializable as exc:
        exc.segments.append(".value")
        raise


def _text(value: Stored, key: str = "v") -> str:
    """``value[key]``, which must be a string.

    :raises KeyError: it is missing.
    :raises TypeError: it is not a string.
    """
    found = value[key]
    if not isinstance(found, str):
        raise TypeError(f"{key!r} should be a string")
    return found


def _load_int(value: Stored) -> int:
    return int(_text(value), 16)


def _load_float(value: Stored) -> float:
    return _NON_FINITE[_text(value)]


def _load_bytes(value: Stored) -> bytes:
    return base64.b64decode(_text(value).encode("ascii"), validate=True)


def _load_bytearray(value: Stored) -> bytearray:
    return bytearray(_load_bytes(value))


def _rezone(loaded: _Zoned, value: Stored) -> _Zoned:
    if value.get("tz") is not None:
        key = _text(value, "tz")
        # Same wall time and fold in the same zone: the value that was stored, even if the
        # zone's rules changed in between.
        loaded = loaded.replace(tzinfo=zoneinfo.ZoneInfo(key))
    if value.get("fold"):
        loaded = loaded.replace(fold=1)
    return loaded


def _load_datetime(value: Stored) -> dt.datetime:
    return _rezone(dt.datetime.fromisoformat(_text(value)), value)


def _load_date(value: Stored) -> dt.date:
    return dt.date.fromisoformat(_text(value))


def _load_time(value: Stored) -> dt.time:
    return _rezone(dt.time.fromisoformat(_text(value)), value)


def _load_timedelta(value: Stored) -> dt.timedelta:
    parts = value["v"]
    if not isinstance(parts, list):
        raise TypeError("'v' should be a list")
    days, seconds, microseconds = [_number(part) for part in parts]
    return dt.timedelta(days=days, seconds=seconds, microseconds=microseconds)


def _number(part: JSONValue) -> float:
    if not isinstance(part, (int, float)):
        raise TypeError(f"{shown_repr(part)} should be a number")
    return part


def _load_decimal(value: Stored) -> decimal.Decimal:
    return decimal.Decimal(_text(value))


def _load_uuid(value: Stored) -> uuid.UUID:
    return uuid.UUID(_text(value))


def load_enum(value: Stored, load_part: t.Callable[[JSONValue], object]) -> enum.Enum:
    """The member an ``enum`` form names, a flag combination's value loaded with
    ``load_part``.

    :raises ~flask_solidq.errors.DeserializationError: the class or the member is gone.
    """
    path = field(value, "cls", str)
    cls = load_class(path, "enum member")
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
        raise DeserializationError(f"Can't load a stored enum member: {path} is not an Enum.")
    if "n" in value:
        name = field(value, "n", str)
        try:
            return cls[name]
        except KeyError:
            raise DeserializationError(
                f"Can't load the stored enum member {path}.{name}: {path} has no such member."
            ) from None
    try:
        return cls(load_part(value.get("v")))
    except ValueError as exc:
        raise DeserializationError(f"Can't load a stored {path} member: {exc}") from None


#: The dump functions of the single-value forms, by the exact type they store.
DUMPERS: dict[type, Dumper] = {
    str: _dump_str,
    int: _dump_int,
    float: _dump_float,
    bytes: _dump_bytes,
    bytearray: _dump_bytearray,
    dt.datetime: _dump_datetime,
    dt.date: _dump_date,
    dt.time: _dump_time,
    dt.timedelta: _dump_timedelta,
    decimal.Decimal: _dump_decimal,
    uuid.UUID: _dump_uuid,
}

#: The load functions of the single-value forms, by tag. They may raise ``LookupError``,
#: ``TypeError``, ``ValueError`` or ``ArithmeticError`` on malformed input.
LOADERS: dict[str, Loader] = {
    "bytes": _load_bytes,
    "bytearray": _load_bytearray,
    "int": _load_int,
    "float": _load_float,
    "datetime": _load_datetime,
    "date": _load_date,
    "time": _load_time,
    "timedelta": _load_timedelta,
    "decimal": _load_decimal,
    "uuid": _load_uuid,
}
