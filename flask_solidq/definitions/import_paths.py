"""Import paths: the ``module:qualname`` text that names a class or function in stored data.

A job's payload names its definition this way, and a stored enum member or model instance its
class. :mod:`flask_solidq.definitions.arguments` re-exports everything here.
"""

from __future__ import annotations

import importlib
import typing as t


class ImportPathError(ImportError):
    """An import path (``module:qualname``) names nothing that can be imported.

    Only a path that doesn't resolve raises this; an error raised while importing a module
    that does exist propagates as it is.
    """

    # Released as flask_solidq.definitions.arguments.ImportPathError: tracebacks stored with
    # failed executions keep naming it so.
    __module__ = "flask_solidq.definitions.arguments"


def import_path(obj: type | t.Callable[..., object]) -> str:
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


def load_import_path(path: str) -> object:
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
