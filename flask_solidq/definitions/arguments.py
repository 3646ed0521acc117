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

Each value is turned into its form and back by
:mod:`~flask_solidq.definitions.argument_values`, which hands the forms it doesn't own to
:mod:`~flask_solidq.definitions.argument_codecs`,
:mod:`~flask_solidq.definitions.model_references` and
:mod:`~flask_solidq.definitions.custom_serializers`.
"""

from __future__ import annotations

import json
import typing as t

from flask_solidq import argument_filter
from flask_solidq.definitions import argument_codecs
from flask_solidq.definitions import argument_values
from flask_solidq.definitions import custom_serializers
from flask_solidq.definitions import import_paths
from flask_solidq.definitions import model_references
from flask_solidq.errors import DeserializationError
from flask_solidq.errors import SerializationError
from flask_solidq.values import JobArgument
from flask_solidq.values import JSONValue

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

ImportPathError = import_paths.ImportPathError
MissingRecord = model_references.MissingRecord
import_path = import_paths.import_path

#: A payload as stored (``solidq_jobs.arguments``, ``solidq_coalesced_calls.arguments``):
#: compact JSON, non-ASCII kept as it is.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
dumps = _ENCODER.encode
load_import_path = import_paths.load_import_path

# Bound here, not looked up on their modules: the loops below read them once per argument.
_dump = argument_values.dump_value
_load = argument_values.load_value


def payload_encoder() -> t.Callable[[JSONValue], str]:
    """:func:`dumps` for the many payloads of one bulk enqueue, its output byte for byte.

    Each :func:`dumps` call makes the JSON module's C encoder anew, which was half the cost of
    encoding a small payload; this makes it once. Use a new one per enqueue: after an error the
    encoder's record of the containers being encoded (its circular-reference check) may be
    left filled.
    """
    make = getattr(json.encoder, "c_make_encoder", None)  # not in the type stubs
    if make is None:  # no C accelerator: nothing made per call to save
        return dumps
    encode = make(
        {},
        _ENCODER.default,
        json.encoder.encode_basestring,
        _ENCODER.indent,
        _ENCODER.key_separator,
        _ENCODER.item_separator,
        _ENCODER.sort_keys,
        _ENCODER.skipkeys,
        _ENCODER.allow_nan,
    )
    join = "".join
    return lambda payload: join(encode(payload, 0))  # the 0: no indentation to start at


def register_serializer(
    cls: type,
    dump: custom_serializers.CustomDump,
    load: custom_serializers.CustomLoad,
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
    if argument_values.is_stored_natively(cls):
        raise TypeError(
            f"{cls.__qualname__} is stored natively; it can't get a serializer of its own."
        )
    if name is None:
        name = import_path(cls)
    custom_serializers.register(cls, name, dump, load)
    argument_values.forget_resolved()


# -- dumping -----------------------------------------------------------------------------------


def _serialization_error(exc: Exception, position: str) -> SerializationError:
    if isinstance(exc, RecursionError):
        return SerializationError(
            f"Can't store {position}: it is nested too deeply, or contains itself.",
            position=position,
        )
    assert isinstance(exc, argument_codecs.Unserializable)
    path = "".join(reversed(exc.segments))
    return SerializationError(f"Can't store {position}{path}: {exc.reason}", position=position)


def dump_args(args: tuple[JobArgument, ...]) -> list[JSONValue]:
    """Turn a job's positional arguments into a list that :func:`json.dumps` accepts.

    :param args: the positional arguments, as the job was called with them.
    :raises ~flask_solidq.errors.SerializationError: an argument, or something inside one,
        can't be stored. The message names where (``argument 0['items'][2]``), and
        ``position`` names the argument (``argument 0``).
    """
    out: list[JSONValue] = []
    append = out.append
    i = 0
    try:
        for i, value in enumerate(args):  # noqa: B007 (i is read in the except clause)
            append(
                value
                if value is None
                or value is True
                or value is False
                or (type(value) is str and value.isascii())
                else _dump(value)
            )
    except (argument_codecs.Unserializable, RecursionError) as exc:
        raise _serialization_error(exc, f"argument {i}") from exc.__cause__
    return out


def dump_kwargs(kwargs: t.Mapping[str, JobArgument]) -> dict[str, JSONValue]:
    """Turn a job's keyword arguments into a dict that :func:`json.dumps` accepts.

    The mapping itself is never tagged: its keys are argument names, so it may even have an
    ``"_sq"`` key.

    :param kwargs: the keyword arguments, as the job was called with them.
    :raises ~flask_solidq.errors.SerializationError: a value, or something inside one, can't
        be stored, or a name is not a string. The message names where (``keyword argument
        'when'``), and so does ``position``.
    """
    out: dict[str, JSONValue] = {}
    name: object = None
    try:
        for name, value in kwargs.items():
            if type(name) is not str:
                raise SerializationError(
                    f"Keyword argument names must be strings, not {name!r}.",
                    position=f"keyword argument {name!r}",
                )
            if not (name.isascii() or argument_codecs.encodable(name)):
                position = f"keyword argument {name!r}"
                reason = argument_codecs.surrogate_reason(name).replace("it is", "its name is", 1)
                raise SerializationError(f"Can't store {position}: {reason}", position=position)
            out[name] = (
                value
                if value is None
                or value is True
                or value is False
                or (type(value) is str and value.isascii())
                else _dump(value)
            )
    except (argument_codecs.Unserializable, RecursionError) as exc:
        raise _serialization_error(exc, f"keyword argument {name!r}") from exc.__cause__
    return out


# -- loading -----------------------------------------------------------------------------------


def _deserialization_error(exc: DeserializationError, position: str) -> DeserializationError:
    if type(exc) is DeserializationError:
        return DeserializationError(f"Can't load {position}: {exc}")
    return exc  # A subclass such as MissingRecord carries data of its own: keep it.


def load_args(data: JSONValue) -> tuple[JobArgument, ...]:
    """Rebuild a job's positional arguments from what :func:`dump_args` returned, after a
    trip through JSON.

    :param data: the list as :func:`json.loads` returned it.
    :raises ~flask_solidq.errors.DeserializationError: the data is malformed, names a class
        that can no longer be imported, or names a database row that is gone
        (:class:`MissingRecord`).
    """
    if type(data) is not list:
        shown = argument_filter.current().filtered(data)
        raise DeserializationError(f"Stored positional arguments must be a list, not {shown!r}.")
    out: list[JobArgument] = []
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


def load_kwargs(data: JSONValue) -> dict[str, JobArgument]:
    """Rebuild a job's keyword arguments from what :func:`dump_kwargs` returned, after a trip
    through JSON.

    :param data: the dict as :func:`json.loads` returned it.
    :raises ~flask_solidq.errors.DeserializationError: as for :func:`load_args`.
    """
    if type(data) is not dict:
        shown = argument_filter.current().filtered(data)
        raise DeserializationError(f"Stored keyword arguments must be a dict, not {shown!r}.")
    out: dict[str, JobArgument] = {}
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
