"""Job arguments to JSON and back.

A job's positional and keyword arguments are stored as JSON text in the job's row and loaded
again, maybe in another process, maybe days later. What comes back must equal what went in
and have the same types, or a job would run with subtly different arguments than it was
called with: a tuple that came back a list, a naive datetime that came back aware.

Plain JSON values (``str``, ``int``, ``float``, ``bool``, ``None``, lists, and dicts with
``str`` keys) are stored as they are: bulk enqueue serializes tens of thousands of jobs a
second, so they go through a fast path that dispatches on the exact type. Everything else
becomes a small *tagged* dict whose ``"_sq"`` key names the form:

.. code-block:: text

    tuple      {"_sq": "tuple", "v": [item, ...]}
    set        {"_sq": "set", "v": [item, ...]}
    frozenset  {"_sq": "frozenset", "v": [item, ...]}
    dict       {"_sq": "dict", "v": [[key, value], ...]}
    bytes      {"_sq": "bytes", "v": "<base64>"}
    bytearray  {"_sq": "bytearray", "v": "<base64>"}
    int        {"_sq": "int", "v": "<hex>"}
    float      {"_sq": "float", "v": "nan" | "inf" | "-inf"}
    datetime   {"_sq": "datetime", "v": "<isoformat>", "tz": "<zone key>", "fold": 1}
    date       {"_sq": "date", "v": "2026-01-02"}
    time       {"_sq": "time", "v": "<isoformat>", "tz": "<zone key>", "fold": 1}
    timedelta  {"_sq": "timedelta", "v": [days, seconds, microseconds]}
    decimal    {"_sq": "decimal", "v": "1.10"}
    uuid       {"_sq": "uuid", "v": "12345678-1234-5678-1234-567812345678"}
    enum       {"_sq": "enum", "cls": "module:Qualname", "n": "MEMBER"}
    enum       {"_sq": "enum", "cls": "module:Qualname", "v": value}
    model      {"_sq": "model", "cls": "module:Qualname", "pk": [value, ...]}
    custom     {"_sq": "custom", "name": "<name>", "v": value}

Notes on the forms:

-   Every ``item``, ``key``, ``value`` and primary key value above is itself stored in this
    format, so containers nest.
-   The ``dict`` form is used only for a dict whose keys are not all ``str``, or that has an
    ``"_sq"`` key of its own; any other dict is stored as it is. The top-level keyword
    argument mapping is never tagged: its keys are the argument names.
-   The ``int`` form is used only from ±2**2000 on, because Python may refuse to write a
    long int in decimal (see :func:`sys.set_int_max_str_digits`); the ``float`` form only for
    NaN and the infinities, which strict JSON (and PostgreSQL's ``json``) doesn't allow.
-   ``tz`` is present when the tzinfo is a :class:`zoneinfo.ZoneInfo` with a key, so the value
    comes back in the same zone; other tzinfos keep their UTC offset only. ``fold`` is present
    only when it is 1.
-   ``enum`` stores the member's name, or its value (``"v"``) for a flag combination that has
    no single member name. ``model`` stores a mapped SQLAlchemy instance by reference, as its
    primary key; it is loaded from the database when the job runs. ``custom`` is a type
    taught with :func:`register_serializer`, under the name it was registered with.

The stored format is a contract: rows written by one version are read by the next. Forms may
be added, but an existing form keeps its tag and fields.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import enum
import importlib
import reprlib
import typing as t
import uuid
import zoneinfo

import sqlalchemy as sa
from flask import current_app
from flask import has_app_context
from sqlalchemy.orm import InstanceState
from sqlalchemy.orm import Mapper

from flask_solidq.errors import DeserializationError
from flask_solidq.errors import SerializationError
from flask_solidq.errors import SolidQError

__all__ = [
    "ImportPathError",
    "MissingRecord",
    "dump_args",
    "dump_kwargs",
    "import_path",
    "load_args",
    "load_import_path",
    "load_kwargs",
    "register_serializer",
]

#: The key that marks a dict as a tagged form.
TAG = "_sq"

# Beyond this magnitude an int is stored in hex: Python refuses to convert ints of more than
# ``sys.get_int_max_str_digits()`` decimal digits (at least 640) to or from text.
_BIG_INT = 1 << 2000

_NoneType = type(None)

#: Types stored as they are, without a look at the value.
_PLAIN: frozenset[type] = frozenset((str, bool, _NoneType))


class MissingRecord(DeserializationError):
    """A job argument is a database row that no longer exists."""

    def __init__(self, model: str, primary_key: t.Any) -> None:
        #: The model class's import path, ``module:qualname``.
        self.model = model
        #: The primary key: a scalar, or a tuple for a composite key.
        self.primary_key = primary_key
        super().__init__(
            f"The {model} row with primary key {primary_key!r}, passed to the job as an"
            " argument, no longer exists."
        )


class ImportPathError(ImportError):
    """An import path (``module:qualname``) names nothing that can be imported.

    Only a path that doesn't resolve raises this; an error raised while importing a module
    that does exist propagates as it is.
    """


class _Unserializable(Exception):
    """Raised inside the dump functions; the path is built while it propagates, so the fast
    path never formats one."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[str] = []


# -- import paths ------------------------------------------------------------------------------


def import_path(obj: t.Any) -> str:
    """The ``module:qualname`` path that :func:`load_import_path` imports ``obj`` back from.

    An object defined inside a function still gets a path (its qualname contains
    ``<locals>``), for messages; loading it raises.

    :param obj: a class or function.
    :raises TypeError: ``obj`` has no ``__module__`` or ``__qualname__``.
    """
    try:
        return f"{obj.__module__}:{obj.__qualname__}"
    except AttributeError:
        raise TypeError(
            f"{obj!r} has no import path: only classes and functions have one."
        ) from None


def load_import_path(path: str) -> t.Any:
    """Import the object that :func:`import_path` named ``path``.

    :param path: ``module:qualname``, as :func:`import_path` returns it.
    :raises ImportPathError: the path is malformed, the module doesn't exist, or the module
        has no such attribute (or the object was defined inside a function). An exception
        raised by the module's own code while importing propagates unchanged.
    """
    module_name, sep, qualname = path.partition(":")
    if not sep or not module_name or not qualname:
        raise ImportPathError(f"{path!r} is not an import path of the form 'module:qualname'.")
    if "<locals>" in qualname:
        raise ImportPathError(
            f"{path!r} was defined inside a function, so it can't be imported by name."
            " Define it at the top level of its module."
        )
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only the module itself (or a parent package) missing means the path is wrong; a
        # missing dependency of an existing module is that module's own error.
        if exc.name is None or not (
            module_name == exc.name or module_name.startswith(exc.name + ".")
        ):
            raise
        raise ImportPathError(f"Can't import {path!r}: there is no module {exc.name!r}.") from exc
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportPathError(
                f"Can't import {path!r}: {module_name!r} has no attribute {qualname!r}."
            ) from None
    return obj


# -- custom serializers ------------------------------------------------------------------------

# cls -> (name, dump); name -> (cls, load).
_custom_dumps: dict[type, tuple[str, t.Callable[[t.Any], t.Any]]] = {}
_custom_loads: dict[str, tuple[type, t.Callable[[t.Any], t.Any]]] = {}


def register_serializer(
    cls: type,
    dump: t.Callable[[t.Any], t.Any],
    load: t.Callable[[t.Any], t.Any],
    *,
    name: str | None = None,
) -> None:
    """Teach flask-solidq to store job arguments of type ``cls``.

    Instances of ``cls`` and of its subclasses are stored as ``dump(value)`` under ``name``,
    and loaded with ``load(stored)``. The name, not the class, is what is stored, so keep it
    stable while jobs that carry it are queued.

    ``load`` may raise :class:`~flask_solidq.errors.DeserializationError` to say that the value
    is gone for good; any other exception propagates as it is, so a passing failure (the
    database is down) keeps the job retryable.

    :param cls: the type to store.
    :param dump: returns something this module can store: plain JSON values, or any type it
        knows, nested as deep as needed.
    :param load: rebuilds the value from what ``dump`` returned, loaded back already.
    :param name: the name stored with the value; defaults to ``cls``'s ``module:qualname``.
        Registering under a name already used replaces the earlier pair.
    :raises TypeError: ``cls`` is not a class, or is a type stored natively (such as
        ``str``, ``tuple`` or ``datetime``), whose meaning can't change.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_serializer() needs a class, not {cls!r}.")
    if cls in _DUMPERS or cls in _PLAIN:
        raise TypeError(
            f"{cls.__qualname__} is stored natively; it can't get a serializer of its own."
        )
    if name is None:
        name = import_path(cls)
    previous = _custom_loads.get(name)
    if previous is not None and _custom_dumps.get(previous[0], (None,))[0] == name:
        del _custom_dumps[previous[0]]
    _custom_dumps[cls] = (name, dump)
    _custom_loads[name] = (cls, load)
    _resolved.clear()


# -- dumping -----------------------------------------------------------------------------------


def _dump(value: t.Any) -> t.Any:
    cls = type(value)
    if cls in _PLAIN:
        return value
    dumper = _DUMPERS.get(cls)
    if dumper is None:
        dumper = _resolved.get(cls) or _resolve(cls, value)
    return dumper(value)


def _dump_int(value: int) -> t.Any:
    if -_BIG_INT < value < _BIG_INT:
        return value
    return {TAG: "int", "v": hex(value)}


def _dump_float(value: float) -> t.Any:
    if value - value == 0.0:  # False for NaN and the infinities only.
        return value
    return {TAG: "float", "v": repr(value)}


def _dump_items(value: t.Any) -> list[t.Any]:
    out: list[t.Any] = []
    append = out.append
    i = 0
    try:
        for i, item in enumerate(value):  # noqa: B007 (i is read in the except clause)
            append(item if type(item) in _PLAIN else _dump(item))
    except _Unserializable as exc:
        exc.segments.append(f"[{i}]")
        raise
    return out


def _dump_members(value: set[t.Any] | frozenset[t.Any]) -> list[t.Any]:
    out: list[t.Any] = []
    append = out.append
    for item in value:
        try:
            append(item if type(item) in _PLAIN else _dump(item))
        except _Unserializable as exc:
            exc.segments.append(f"<element {reprlib.repr(item)}>")
            raise
    return out


def _dump_tuple(value: tuple[t.Any, ...]) -> dict[str, t.Any]:
    return {TAG: "tuple", "v": _dump_items(value)}


def _dump_set(value: set[t.Any]) -> dict[str, t.Any]:
    return {TAG: "set", "v": _dump_members(value)}


def _dump_frozenset(value: frozenset[t.Any]) -> dict[str, t.Any]:
    return {TAG: "frozenset", "v": _dump_members(value)}


def _dump_dict(value: dict[t.Any, t.Any]) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {}
    key = None
    try:
        for key, item in value.items():
            if type(key) is not str:
                break
            out[key] = item if type(item) in _PLAIN else _dump(item)
        else:
            if TAG not in out:
                return out
    except _Unserializable as exc:
        exc.segments.append(f"[{key!r}]")
        raise
    return _dump_pairs(value)


def _dump_pairs(value: dict[t.Any, t.Any]) -> dict[str, t.Any]:
    pairs = []
    for key, item in value.items():
        try:
            dumped_key = _dump(key)
        except _Unserializable as exc:
            exc.segments.append(f"<key {reprlib.repr(key)}>")
            raise
        try:
            pairs.append([dumped_key, _dump(item)])
        except _Unserializable as exc:
            exc.segments.append(f"[{key!r}]")
            raise
    return {TAG: "dict", "v": pairs}


def _dump_bytes(value: bytes) -> dict[str, t.Any]:
    return {TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}


def _dump_bytearray(value: bytearray) -> dict[str, t.Any]:
    return {TAG: "bytearray", "v": base64.b64encode(value).decode("ascii")}


def _zoned(out: dict[str, t.Any], value: dt.datetime | dt.time) -> dict[str, t.Any]:
    tzinfo = value.tzinfo
    if isinstance(tzinfo, zoneinfo.ZoneInfo) and tzinfo.key is not None:
        out["tz"] = tzinfo.key
    if value.fold:
        out["fold"] = 1
    return out


def _dump_datetime(value: dt.datetime) -> dict[str, t.Any]:
    return _zoned({TAG: "datetime", "v": value.isoformat()}, value)


def _dump_date(value: dt.date) -> dict[str, t.Any]:
    return {TAG: "date", "v": value.isoformat()}


def _dump_time(value: dt.time) -> dict[str, t.Any]:
    return _zoned({TAG: "time", "v": value.isoformat()}, value)


def _dump_timedelta(value: dt.timedelta) -> dict[str, t.Any]:
    return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}


def _dump_decimal(value: decimal.Decimal) -> dict[str, t.Any]:
    return {TAG: "decimal", "v": str(value)}


def _dump_uuid(value: uuid.UUID) -> dict[str, t.Any]:
    return {TAG: "uuid", "v": str(value)}


def _dump_enum(value: enum.Enum) -> dict[str, t.Any]:
    cls = type(value)
    name = value._name_
    if name is not None and cls.__members__.get(name) is value:
        return {TAG: "enum", "cls": import_path(cls), "n": name}
    try:  # A flag combination: no single member has its name.
        return {TAG: "enum", "cls": import_path(cls), "v": _dump(value._value_)}
    except _Unserializable as exc:
        exc.segments.append(".value")
        raise


def _dump_model(value: t.Any) -> dict[str, t.Any]:
    state = sa.inspect(value, raiseerr=False)
    if not isinstance(state, InstanceState) or state.mapper is None:
        raise _Unserializable(f"its class {_type_name(type(value))} is no longer mapped.")
    identity = state.identity
    if identity is None:
        identity = state.mapper.primary_key_from_instance(value)
    if any(part is None for part in identity):
        raise _Unserializable(
            f"it is a {_type_name(type(value))} without a primary key yet. Model instances are"
            " stored by primary key: flush or commit it first (db.session.flush()), or pass"
            " the values the job needs instead."
        )
    try:
        pk = [_dump(part) for part in identity]
    except _Unserializable as exc:
        exc.segments.append("<primary key>")
        raise
    return {TAG: "model", "cls": import_path(type(value)), "pk": pk}


def _custom_dumper(name: str, dump: t.Callable[[t.Any], t.Any]) -> t.Callable[[t.Any], t.Any]:
    def dump_custom(value: t.Any) -> dict[str, t.Any]:
        try:
            dumped = dump(value)
        except Exception as exc:
            raise _Unserializable(
                f"the dump function registered as {name!r} raised {exc!r}."
            ) from exc
        try:
            return {TAG: "custom", "name": name, "v": _dump(dumped)}
        except _Unserializable as exc:
            exc.segments.append(f"<as dumped for {name!r}>")
            raise

    return dump_custom


#: The exact types that have a dump function. ``str``, ``bool`` and ``None`` are in _PLAIN.
_DUMPERS: dict[type, t.Callable[[t.Any], t.Any]] = {
    int: _dump_int,
    float: _dump_float,
    list: _dump_items,
    dict: _dump_dict,
    tuple: _dump_tuple,
    set: _dump_set,
    frozenset: _dump_frozenset,
    bytes: _dump_bytes,
    bytearray: _dump_bytearray,
    dt.datetime: _dump_datetime,
    dt.date: _dump_date,
    dt.time: _dump_time,
    dt.timedelta: _dump_timedelta,
    decimal.Decimal: _dump_decimal,
    uuid.UUID: _dump_uuid,
}

#: Dump functions found for other types (custom, enum, model): filled by _resolve, emptied by
#: register_serializer.
_resolved: dict[type, t.Callable[[t.Any], t.Any]] = {}


def _type_name(cls: type) -> str:
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _check_importable(cls: type, what: str) -> None:
    path = import_path(cls)
    try:
        found = load_import_path(path)
    except ImportPathError:
        found = None
    if found is not cls:
        raise _Unserializable(
            f"it is {what} of class {_type_name(cls)}, which can't be imported back by name"
            + (" (it is defined inside a function)" if "<locals>" in path else "")
            + ". Define the class at the top level of a module."
        )


def _resolve(cls: type, value: t.Any) -> t.Callable[[t.Any], t.Any]:
    """Find the dump function for a type that isn't in _DUMPERS, the slow way, once."""
    dumper: t.Callable[[t.Any], t.Any] | None = None
    for base in cls.__mro__:
        entry = _custom_dumps.get(base)
        if entry is not None:
            dumper = _custom_dumper(*entry)
            break
    if dumper is None and issubclass(cls, enum.Enum):
        _check_importable(cls, "an enum member")
        dumper = _dump_enum
    if dumper is None:
        state = sa.inspect(value, raiseerr=False)
        if isinstance(state, InstanceState) and state.mapper is not None:
            _check_importable(cls, "a model instance")
            dumper = _dump_model
    if dumper is None:
        native = next((base for base in cls.__mro__ if base in _DUMPERS or base in _PLAIN), None)
        hint = (
            f" It is a subclass of {native.__qualname__}, but only {native.__qualname__}"
            " itself is stored natively, so that the type doesn't change on the way back."
            if native is not None
            else ""
        )
        raise _Unserializable(
            f"flask-solidq can't store a value of type {_type_name(cls)} as a job argument."
            f"{hint} Pass something it can store instead (such as the object's id, and load"
            " the object in the job), or teach it the type with flask_solidq.definitions."
            f"arguments.register_serializer({cls.__qualname__}, dump, load)."
        )
    _resolved[cls] = dumper
    return dumper


def _serialization_error(exc: Exception, position: str) -> SerializationError:
    if isinstance(exc, RecursionError):
        return SerializationError(
            f"Can't store {position}: it is nested too deeply, or contains itself.",
            position=position,
        )
    assert isinstance(exc, _Unserializable)
    path = "".join(reversed(exc.segments))
    return SerializationError(f"Can't store {position}{path}: {exc.reason}", position=position)


def dump_args(args: tuple[t.Any, ...]) -> list[t.Any]:
    """Turn a job's positional arguments into a list that :func:`json.dumps` accepts.

    :param args: the positional arguments, as the job was called with them.
    :raises ~flask_solidq.errors.SerializationError: an argument, or something inside one,
        can't be stored. The message names where (``argument 0['items'][2]``), and
        ``position`` names the argument (``argument 0``).
    """
    out: list[t.Any] = []
    append = out.append
    i = 0
    try:
        for i, value in enumerate(args):  # noqa: B007 (i is read in the except clause)
            append(value if type(value) in _PLAIN else _dump(value))
    except (_Unserializable, RecursionError) as exc:
        raise _serialization_error(exc, f"argument {i}") from exc.__cause__
    return out


def dump_kwargs(kwargs: dict[str, t.Any]) -> dict[str, t.Any]:
    """Turn a job's keyword arguments into a dict that :func:`json.dumps` accepts.

    The mapping itself is never tagged: its keys are argument names, so it may even have an
    ``"_sq"`` key.

    :param kwargs: the keyword arguments, as the job was called with them.
    :raises ~flask_solidq.errors.SerializationError: a value, or something inside one, can't
        be stored, or a name is not a string. The message names where (``keyword argument
        'when'``), and so does ``position``.
    """
    out: dict[str, t.Any] = {}
    name: t.Any = None
    try:
        for name, value in kwargs.items():
            if type(name) is not str:
                raise SerializationError(
                    f"Keyword argument names must be strings, not {name!r}.",
                    position=f"keyword argument {name!r}",
                )
            out[name] = value if type(value) in _PLAIN else _dump(value)
    except (_Unserializable, RecursionError) as exc:
        raise _serialization_error(exc, f"keyword argument {name!r}") from exc.__cause__
    return out


# -- loading -----------------------------------------------------------------------------------


def _load(value: t.Any) -> t.Any:
    loader = _LOADERS_BY_TYPE.get(type(value))
    return value if loader is None else loader(value)


def _load_list(value: list[t.Any]) -> list[t.Any]:
    return [_load(item) for item in value]


def _load_dict(value: dict[str, t.Any]) -> t.Any:
    if TAG in value:
        return _load_tagged(value)
    return {key: _load(item) for key, item in value.items()}


_LOADERS_BY_TYPE: dict[type, t.Callable[[t.Any], t.Any]] = {list: _load_list, dict: _load_dict}


def _load_tagged(value: dict[str, t.Any]) -> t.Any:
    tag = value[TAG]
    if type(tag) is str:
        loader = _LOADERS.get(tag)
        if loader is not None:
            try:
                return loader(value)
            except SolidQError:
                raise
            except (LookupError, TypeError, ValueError, ArithmeticError) as exc:
                raise DeserializationError(
                    f"The stored {tag} {reprlib.repr(value)} is malformed: {exc}"
                ) from exc
        raw_loader = _RAW_LOADERS.get(tag)
        if raw_loader is not None:
            return raw_loader(value)
    raise DeserializationError(
        f"Unknown stored form {tag!r} in {reprlib.repr(value)}: it was written by another"
        " version of flask-solidq, or edited by hand."
    )


def _field(value: dict[str, t.Any], key: str, cls: type) -> t.Any:
    """``value[key]``, checked to be a ``cls``, for the loaders that run outside the
    malformed-data conversion in _load_tagged."""
    field = value.get(key)
    if type(field) is not cls:
        raise DeserializationError(
            f"The stored {value.get(TAG)} {reprlib.repr(value)} is malformed: {key!r} should be"
            f" a {cls.__name__}."
        )
    return field


def _load_class(path: str, what: str) -> t.Any:
    try:
        return load_import_path(path)
    except ImportPathError as exc:
        raise DeserializationError(f"Can't load a stored {what}: {exc}") from exc


def _load_int(value: dict[str, t.Any]) -> int:
    return int(value["v"], 16)


_NON_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _load_float(value: dict[str, t.Any]) -> float:
    return _NON_FINITE[value["v"]]


def _load_tuple(value: dict[str, t.Any]) -> tuple[t.Any, ...]:
    return tuple([_load(item) for item in value["v"]])


def _load_set(value: dict[str, t.Any]) -> set[t.Any]:
    return {_load(item) for item in value["v"]}


def _load_frozenset(value: dict[str, t.Any]) -> frozenset[t.Any]:
    return frozenset([_load(item) for item in value["v"]])


def _load_pairs(value: dict[str, t.Any]) -> dict[t.Any, t.Any]:
    return {_load(key): _load(item) for key, item in value["v"]}


def _load_bytes(value: dict[str, t.Any]) -> bytes:
    return base64.b64decode(value["v"].encode("ascii"), validate=True)


def _load_bytearray(value: dict[str, t.Any]) -> bytearray:
    return bytearray(_load_bytes(value))


def _rezone(loaded: t.Any, value: dict[str, t.Any]) -> t.Any:
    key = value.get("tz")
    if key is not None:
        # Same wall time and fold in the same zone: the value that was stored, even if the
        # zone's rules changed in between.
        loaded = loaded.replace(tzinfo=zoneinfo.ZoneInfo(key))
    if value.get("fold"):
        loaded = loaded.replace(fold=1)
    return loaded


def _load_datetime(value: dict[str, t.Any]) -> dt.datetime:
    return _rezone(dt.datetime.fromisoformat(value["v"]), value)  # type: ignore[no-any-return]


def _load_date(value: dict[str, t.Any]) -> dt.date:
    return dt.date.fromisoformat(value["v"])


def _load_time(value: dict[str, t.Any]) -> dt.time:
    return _rezone(dt.time.fromisoformat(value["v"]), value)  # type: ignore[no-any-return]


def _load_timedelta(value: dict[str, t.Any]) -> dt.timedelta:
    days, seconds, microseconds = value["v"]
    return dt.timedelta(days=days, seconds=seconds, microseconds=microseconds)


def _load_decimal(value: dict[str, t.Any]) -> decimal.Decimal:
    text = value["v"]
    if type(text) is not str:
        raise TypeError("'v' should be a string")
    return decimal.Decimal(text)


def _load_uuid(value: dict[str, t.Any]) -> uuid.UUID:
    return uuid.UUID(value["v"])


def _load_enum(value: dict[str, t.Any]) -> enum.Enum:
    path = _field(value, "cls", str)
    cls = _load_class(path, "enum member")
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
        raise DeserializationError(f"Can't load a stored enum member: {path} is not an Enum.")
    if "n" in value:
        name = _field(value, "n", str)
        try:
            return cls[name]  # type: ignore[no-any-return]
        except KeyError:
            raise DeserializationError(
                f"Can't load the stored enum member {path}.{name}: {path} has no such member."
            ) from None
    try:
        return cls(_load(value.get("v")))  # type: ignore[no-any-return]
    except ValueError as exc:
        raise DeserializationError(f"Can't load a stored {path} member: {exc}") from None


def _load_model(value: dict[str, t.Any]) -> t.Any:
    path = _field(value, "cls", str)
    stored_pk = _field(value, "pk", list)
    cls = _load_class(path, "model instance")
    if not isinstance(sa.inspect(cls, raiseerr=False), Mapper):
        raise DeserializationError(
            f"Can't load a stored model instance: {path} is no longer a mapped model."
        )
    parts = tuple([_load(part) for part in stored_pk])
    pk = parts if len(parts) != 1 else parts[0]
    if not has_app_context():
        raise DeserializationError(
            f"Loading a stored {path} from the database needs an app context: run the job"
            " inside `with app.app_context():`."
        )
    extension = current_app.extensions.get("sqlalchemy")
    if extension is None:
        raise DeserializationError(
            f"Loading a stored {path} needs Flask-SQLAlchemy, but the current app has no"
            " Flask-SQLAlchemy extension."
        )
    # Database errors propagate as they are: a passing failure must not look like a
    # missing row.
    instance = extension.session.get(cls, pk)
    if instance is None:
        raise MissingRecord(path, pk)
    return instance


def _load_custom(value: dict[str, t.Any]) -> t.Any:
    name = _field(value, "name", str)
    entry = _custom_loads.get(name)
    if entry is None:
        raise DeserializationError(
            f"Can't load a stored {name!r}: no serializer is registered under that name in this"
            " process. Import the module that calls register_serializer() for it."
        )
    # The load function's own exceptions propagate as they are (see register_serializer).
    return entry[1](_load(value.get("v")))


#: Loaders whose errors on malformed input are turned into DeserializationError.
_LOADERS: dict[str, t.Callable[[dict[str, t.Any]], t.Any]] = {
    "tuple": _load_tuple,
    "set": _load_set,
    "frozenset": _load_frozenset,
    "dict": _load_pairs,
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

#: Loaders that call code beyond this module (imports, the database, registered load
#: functions), whose exceptions must propagate as they are.
_RAW_LOADERS: dict[str, t.Callable[[dict[str, t.Any]], t.Any]] = {
    "enum": _load_enum,
    "model": _load_model,
    "custom": _load_custom,
}


def _deserialization_error(exc: DeserializationError, position: str) -> DeserializationError:
    if type(exc) is DeserializationError:
        return DeserializationError(f"Can't load {position}: {exc}")
    return exc  # A subclass such as MissingRecord carries data of its own: keep it.


def load_args(data: list[t.Any]) -> tuple[t.Any, ...]:
    """Rebuild a job's positional arguments from what :func:`dump_args` returned, after a
    trip through JSON.

    :param data: the list as :func:`json.loads` returned it.
    :raises ~flask_solidq.errors.DeserializationError: the data is malformed, names a class
        that can no longer be imported, or names a database row that is gone
        (:class:`MissingRecord`).
    """
    if type(data) is not list:
        raise DeserializationError(f"Stored positional arguments must be a list, not {data!r}.")
    out: list[t.Any] = []
    append = out.append
    i = 0
    try:
        for i, value in enumerate(data):  # noqa: B007 (i is read in the except clause)
            append(_load(value))
    except DeserializationError as exc:
        error = _deserialization_error(exc, f"argument {i}")
        if error is exc:
            raise
        raise error from exc
    return tuple(out)


def load_kwargs(data: dict[str, t.Any]) -> dict[str, t.Any]:
    """Rebuild a job's keyword arguments from what :func:`dump_kwargs` returned, after a trip
    through JSON.

    :param data: the dict as :func:`json.loads` returned it.
    :raises ~flask_solidq.errors.DeserializationError: as for :func:`load_args`.
    """
    if type(data) is not dict:
        raise DeserializationError(f"Stored keyword arguments must be a dict, not {data!r}.")
    out: dict[str, t.Any] = {}
    name: str | None = None
    try:
        for name, value in data.items():
            out[name] = _load(value)
    except DeserializationError as exc:
        error = _deserialization_error(exc, f"keyword argument {name!r}")
        if error is exc:
            raise
        raise error from exc
    return out
