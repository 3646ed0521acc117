"""The ``model`` form: a mapped SQLAlchemy instance stored by reference.

What is stored is the class's import path and the instance's primary key; the row is loaded
from the database, through Flask-SQLAlchemy's session, when the job runs. The form is described
with the others in :mod:`flask_solidq.definitions.arguments`.
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa
from flask import current_app
from flask import has_app_context
from sqlalchemy.orm import InstanceState
from sqlalchemy.orm import Mapper

from flask_solidq.definitions import argument_codecs
from flask_solidq.definitions import import_paths
from flask_solidq.errors import DeserializationError
from flask_solidq.values import JSONValue


class MissingRecord(DeserializationError):
    """A job argument is a database row that no longer exists."""

    # Released as flask_solidq.definitions.arguments.MissingRecord: failed executions store
    # the class by that name.
    __module__ = "flask_solidq.definitions.arguments"

    def __init__(self, model: str, primary_key: object) -> None:
        #: The model class's import path, ``module:qualname``.
        self.model = model
        #: The primary key: a scalar, or a tuple for a composite key.
        self.primary_key = primary_key
        super().__init__(
            f"The {model} row with primary key {primary_key!r}, passed to the job as an"
            " argument, no longer exists."
        )


def is_model_instance(value: object) -> bool:
    """Whether ``value`` is an instance of a mapped SQLAlchemy class."""
    state = sa.inspect(value, raiseerr=False)
    return isinstance(state, InstanceState) and state.mapper is not None


def dump_reference(
    value: object, dump_part: t.Callable[[object], JSONValue]
) -> argument_codecs.Stored:
    """The ``model`` form of ``value``, each primary key value stored with ``dump_part``.

    :raises ~flask_solidq.definitions.argument_codecs.Unserializable: the class is no longer
        mapped, or the instance has no primary key yet.
    """
    state = sa.inspect(value, raiseerr=False)
    if not isinstance(state, InstanceState) or state.mapper is None:
        raise argument_codecs.Unserializable(
            f"its class {argument_codecs.type_name(type(value))} is no longer mapped."
        )
    identity = state.identity
    if identity is None:
        identity = state.mapper.primary_key_from_instance(value)
    if any(part is None for part in identity):
        raise argument_codecs.Unserializable(
            f"it is a {argument_codecs.type_name(type(value))} without a primary key yet. Model"
            " instances are stored by primary key: flush or commit it first"
            " (db.session.flush()), or pass the values the job needs instead."
        )
    try:
        pk = [dump_part(part) for part in identity]
    except argument_codecs.Unserializable as exc:
        exc.segments.append("<primary key>")
        raise
    return {argument_codecs.TAG: "model", "cls": import_paths.import_path(type(value)), "pk": pk}


def load_reference(
    value: argument_codecs.Stored, load_part: t.Callable[[JSONValue], object]
) -> object:
    """Load the row a ``model`` form names, its primary key values loaded with ``load_part``.

    Needs an app context with Flask-SQLAlchemy. Database errors propagate as they are.

    :raises MissingRecord: the row no longer exists.
    :raises ~flask_solidq.errors.DeserializationError: the class is gone or no longer mapped,
        or there is no app context or no Flask-SQLAlchemy.
    """
    path = argument_codecs.field(value, "cls", str)
    stored_pk: list[JSONValue] = argument_codecs.field(value, "pk", list)
    cls = argument_codecs.load_class(path, "model instance")
    if not isinstance(sa.inspect(cls, raiseerr=False), Mapper):
        raise DeserializationError(
            f"Can't load a stored model instance: {path} is no longer a mapped model."
        )
    parts = tuple([load_part(part) for part in stored_pk])
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
