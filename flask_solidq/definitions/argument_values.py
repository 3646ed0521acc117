"""One job argument value to its stored form and back, whatever its type.

:func:`dump_value` dispatches on the value's exact type and :func:`load_value` on the stored
JSON value's, then on the tag. The container forms live here because they recurse through the
dispatch on the hot path; the other forms' codecs are in
:mod:`~flask_solidq.definitions.argument_codecs`,
:mod:`~flask_solidq.definitions.model_references` and
:mod:`~flask_solidq.definitions.custom_serializers`. The format is described in
:mod:`flask_solidq.definitions.arguments`.
"""

from __future__ import annotations

import enum
import reprlib
import typing as t

from flask_solidq.definitions import argument_codecs
from flask_solidq.definitions import batches
from flask_solidq.definitions import custom_serializers
from flask_solidq.definitions import model_references
from flask_solidq.errors import DeserializationError
from flask_solidq.errors import SolidQError
from flask_solidq.values import JSONValue

Stored = argument_codecs.Stored

# Bound here, not looked up on the module: the dict codecs read it for every dict.
TAG = argument_codecs.TAG

_NoneType = type(None)

#: Types stored as they are, without a look at the value. (``str`` is not one: a string with
#: a lone surrogate can't be stored, so each one gets a look, free for ASCII text.)
PLAIN: frozenset[type] = frozenset((bool, _NoneType))


# -- dumping -----------------------------------------------------------------------------------


def dump_value(value: object) -> JSONValue:
    """``value`` in its stored form, which :func:`json.dumps` accepts.

    :raises ~flask_solidq.definitions.argument_codecs.Unserializable: ``value``, or something
        inside it, can't be stored; its ``segments`` say where, innermost first.
    """
    if value is None or value is True or value is False:  # PLAIN
        return value
    cls = type(value)
    dumper = _DUMPERS.get(cls)
    if dumper is None:
        dumper = _resolved.get(cls) or _resolve(cls, value)
    return dumper(value)


def _dump_items(value: t.Iterable[object]) -> list[JSONValue]:
    out: list[JSONValue] = []
    append = out.append
    i = 0
    try:
        for i, item in enumerate(value):  # noqa: B007 (i is read in the except clause)
            append(
                item
                if item is None
                or item is True
                or item is False
                or (type(item) is str and item.isascii())
                else dump_value(item)
            )
    except argument_codecs.Unserializable as exc:
        exc.segments.append(f"[{i}]")
        raise
    return out


def _dump_members(value: t.AbstractSet[object]) -> list[JSONValue]:
    out: list[JSONValue] = []
    append = out.append
    for item in value:
        try:
            append(
                item
                if item is None
                or item is True
                or item is False
                or (type(item) is str and item.isascii())
                else dump_value(item)
            )
        except argument_codecs.Unserializable as exc:
            exc.segments.append(f"<element {reprlib.repr(item)}>")
            raise
    return out


def _dump_tuple(value: tuple[object, ...]) -> Stored:
    return {TAG: "tuple", "v": _dump_items(value)}


def _dump_set(value: set[object]) -> Stored:
    return {TAG: "set", "v": _dump_members(value)}


def _dump_frozenset(value: frozenset[object]) -> Stored:
    return {TAG: "frozenset", "v": _dump_members(value)}


def _dump_dict(value: dict[object, object]) -> Stored:
    out: Stored = {}
    key = None
    try:
        for key, item in value.items():
            # A key that can't be stored goes the slow way, which names it.
            if type(key) is not str or not (key.isascii() or argument_codecs.encodable(key)):
                break
            out[key] = (
                item
                if item is None
                or item is True
                or item is False
                or (type(item) is str and item.isascii())
                else dump_value(item)
            )
        else:
            if TAG not in out:
                return out
    except argument_codecs.Unserializable as exc:
        exc.segments.append(f"[{key!r}]")
        raise
    return _dump_pairs(value)


def _dump_pairs(value: dict[object, object]) -> Stored:
    pairs: list[JSONValue] = []
    for key, item in value.items():
        try:
            dumped_key = dump_value(key)
        except argument_codecs.Unserializable as exc:
            exc.segments.append(f"<key {reprlib.repr(key)}>")
            raise
        try:
            pairs.append([dumped_key, dump_value(item)])
        except argument_codecs.Unserializable as exc:
            exc.segments.append(f"[{key!r}]")
            raise
    return {TAG: "dict", "v": pairs}


def _dump_enum(value: enum.Enum) -> Stored:
    return argument_codecs.dump_enum(value, dump_value)


def _dump_model(value: object) -> Stored:
    return model_references.dump_reference(value, dump_value)


def _dump_batch(value: batches.Batch) -> Stored:
    return {TAG: "batch", "id": value.id}


#: The exact types that have a dump function. ``bool`` and ``None`` are in PLAIN.
_DUMPERS: dict[type, argument_codecs.Dumper] = {
    **argument_codecs.DUMPERS,
    list: _dump_items,
    dict: _dump_dict,
    tuple: _dump_tuple,
    set: _dump_set,
    frozenset: _dump_frozenset,
    batches.Batch: _dump_batch,
}

#: Dump functions found for other types (custom, enum, model): filled by _resolve, emptied by
#: forget_resolved.
_resolved: dict[type, argument_codecs.Dumper] = {}


def is_stored_natively(cls: type) -> bool:
    """Whether ``cls`` itself has a stored form of its own (subclasses don't)."""
    return cls in _DUMPERS or cls in PLAIN


def forget_resolved() -> None:
    """Forget the dump functions found for types outside the table, after a
    :func:`~flask_solidq.definitions.arguments.register_serializer` call."""
    _resolved.clear()


def _resolve(cls: type, value: object) -> argument_codecs.Dumper:
    """Find the dump function for a type that isn't in _DUMPERS, the slow way, once."""
    dumper: argument_codecs.Dumper | None = None
    entry = custom_serializers.find(cls)
    if entry is not None:
        dumper = custom_serializers.dumper(*entry, dump_part=dump_value)
    if dumper is None and issubclass(cls, enum.Enum):
        argument_codecs.check_importable(cls, "an enum member")
        dumper = _dump_enum
    if dumper is None and model_references.is_model_instance(value):
        argument_codecs.check_importable(cls, "a model instance")
        dumper = _dump_model
    if dumper is None:
        native = next((base for base in cls.__mro__ if is_stored_natively(base)), None)
        hint = (
            f" It is a subclass of {native.__qualname__}, but only {native.__qualname__}"
            " itself is stored natively, so that the type doesn't change on the way back."
            if native is not None
            else ""
        )
        raise argument_codecs.Unserializable(
            f"flask-solidq can't store a value of type {argument_codecs.type_name(cls)} as a job"
            f" argument.{hint} Pass something it can store instead (such as the object's id, and"
            " load the object in the job), or teach it the type with flask_solidq.definitions."
            f"arguments.register_serializer({cls.__qualname__}, dump, load)."
        )
    _resolved[cls] = dumper
    return dumper


# -- loading -----------------------------------------------------------------------------------


def load_value(value: JSONValue) -> object:
    """Rebuild a value from its stored form, after a trip through JSON.

    :raises ~flask_solidq.errors.DeserializationError: the stored form is malformed or names
        something that is gone.
    """
    if type(value) is list:
        return [load_value(item) for item in value]
    if type(value) is dict:
        if TAG in value:
            return load_tagged(value)
        return {key: load_value(item) for key, item in value.items()}
    return value


def load_tagged(value: Stored) -> object:
    """Rebuild a value from its tagged form; turn a malformed one's errors into
    :class:`~flask_solidq.errors.DeserializationError`.

    :raises ~flask_solidq.errors.DeserializationError: the tag is unknown or the form
        malformed.
    """
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
                    f"The stored {tag} {argument_codecs.shown_repr(value)} is malformed: {exc}"
                ) from exc
        raw_loader = _RAW_LOADERS.get(tag)
        if raw_loader is not None:
            return raw_loader(value)
    raise DeserializationError(
        f"Unknown stored form {tag!r} in {argument_codecs.shown_repr(value)}: it was written"
        " by another version of flask-solidq, or edited by hand."
    )


def _items(value: Stored) -> list[JSONValue]:
    """``value["v"]``, the items of a container's form.

    :raises KeyError: it is missing.
    :raises TypeError: it is not a list.
    """
    items = value["v"]
    if not isinstance(items, list):
        raise TypeError("'v' should be a list")
    return items


def _load_tuple(value: Stored) -> tuple[object, ...]:
    return tuple([load_value(item) for item in _items(value)])


def _load_set(value: Stored) -> set[object]:
    return {load_value(item) for item in _items(value)}


def _load_frozenset(value: Stored) -> frozenset[object]:
    return frozenset([load_value(item) for item in _items(value)])


def _load_pairs(value: Stored) -> dict[object, object]:
    return {load_value(key): load_value(item) for key, item in map(_pair, _items(value))}


def _pair(item: JSONValue) -> tuple[JSONValue, JSONValue]:
    """One ``[key, value]`` of a ``dict`` form."""
    if not isinstance(item, list):
        raise TypeError("each pair should be a list")
    key, value = item
    return key, value


def _load_enum(value: Stored) -> enum.Enum:
    return argument_codecs.load_enum(value, load_value)


def _load_model(value: Stored) -> object:
    return model_references.load_reference(value, load_value)


def _load_batch(value: Stored) -> batches.Batch:
    """A fresh read of the stored batch: a callback sees its batch's final counters."""
    batch_id = argument_codecs.field(value, "id", int)
    found = batches.find(batch_id)
    if found is None:
        raise DeserializationError(
            f"Batch {batch_id} no longer exists: its row was cleared (flask solidq"
            " clear-finished) before this job ran."
        )
    return found


def _load_custom(value: Stored) -> object:
    return custom_serializers.load_custom(value, load_value)


#: Loaders whose errors on malformed input are turned into DeserializationError.
_LOADERS: dict[str, argument_codecs.Loader] = {
    "tuple": _load_tuple,
    "set": _load_set,
    "frozenset": _load_frozenset,
    "dict": _load_pairs,
    **argument_codecs.LOADERS,
}

#: Loaders that call code beyond this module (imports, the database, registered load
#: functions), whose exceptions must propagate as they are.
_RAW_LOADERS: dict[str, argument_codecs.Loader] = {
    "enum": _load_enum,
    "model": _load_model,
    "custom": _load_custom,
    "batch": _load_batch,
}
