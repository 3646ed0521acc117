"""The ``custom`` form: types taught with
:func:`~flask_solidq.definitions.arguments.register_serializer`.

A value of such a type is stored as what its registered dump function returned, under the name
it was registered with; the name, not the class, finds the load function again.
"""

from __future__ import annotations

import typing as t

from flask_solidq.definitions import argument_codecs
from flask_solidq.errors import DeserializationError
from flask_solidq.values import JSONValue

#: A registered dump function: it takes an instance of the class it was registered for,
#: which a table of them (keyed by class) can't say, hence ``Any``.
CustomDump = t.Callable[[t.Any], object]
#: A registered load function: it takes what its dump function returned, loaded back, whose
#: type only its author knows, hence ``Any``.
CustomLoad = t.Callable[[t.Any], object]

# cls -> (name, dump); name -> (cls, load).
_custom_dumps: dict[type, tuple[str, CustomDump]] = {}
_custom_loads: dict[str, tuple[type, CustomLoad]] = {}


def register(cls: type, name: str, dump: CustomDump, load: CustomLoad) -> None:
    """Store ``cls`` with ``dump`` and load it with ``load``, under ``name``.

    A name already used is taken over, and the earlier class forgotten. Dump functions already
    found for a type are not: :func:`~flask_solidq.definitions.arguments.register_serializer`
    empties that cache too.
    """
    previous = _custom_loads.get(name)
    if previous is not None and _custom_dumps.get(previous[0], (None,))[0] == name:
        del _custom_dumps[previous[0]]
    _custom_dumps[cls] = (name, dump)
    _custom_loads[name] = (cls, load)


def find(cls: type) -> tuple[str, CustomDump] | None:
    """The name and dump function registered for ``cls`` or its nearest base, if any."""
    for base in cls.__mro__:
        entry = _custom_dumps.get(base)
        if entry is not None:
            return entry
    return None


def dumper(
    name: str, dump: CustomDump, dump_part: t.Callable[[object], JSONValue]
) -> t.Callable[[object], argument_codecs.Stored]:
    """The dump function for a type registered as ``name``: it stores what ``dump`` returns
    with ``dump_part``."""

    def dump_custom(value: object) -> argument_codecs.Stored:
        try:
            dumped = dump(value)
        except Exception as exc:
            raise argument_codecs.Unserializable(
                f"the dump function registered as {name!r} raised {exc!r}."
            ) from exc
        try:
            return {argument_codecs.TAG: "custom", "name": name, "v": dump_part(dumped)}
        except argument_codecs.Unserializable as exc:
            exc.segments.append(f"<as dumped for {name!r}>")
            raise

    return dump_custom


def load_custom(
    value: argument_codecs.Stored, load_part: t.Callable[[JSONValue], object]
) -> object:
    """The value a ``custom`` form holds: what was stored, loaded with ``load_part``, then
    given to the registered load function, whose exceptions propagate as they are.

    :raises ~flask_solidq.errors.DeserializationError: no type is registered under the name.
    """
    name = argument_codecs.field(value, "name", str)
    entry = _custom_loads.get(name)
    if entry is None:
        raise DeserializationError(
            f"Can't load a stored {name!r}: no serializer is registered under that name in this"
            " process. Import the module that calls register_serializer() for it."
        )
    # The load function's own exceptions propagate as they are (see register_serializer).
    return entry[1](load_part(value.get("v")))
