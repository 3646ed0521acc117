"""How a control's ``key`` and ``group`` declarations become the key stored with a job.

One set of rules for concurrency limits, rate limits and coalescing:

* a ``str`` is a literal (``"global"``); a callable receives the job's arguments;
* ``None`` or ``False`` as the *declaration* disables the control;
* any other declared value (``key=123``) gives the bare, class-wide key, and so does no
  declaration at all (:data:`BARE`, ``limits_rate``'s default);
* in a result, a SQLAlchemy model instance becomes ``ClassName/<primary key>``, a list or tuple
  is joined with ``/``, ``None`` drops out, and anything else goes through ``str()``;
* the stored key is ``"<group or job name>/<key>"``; a key callable returning ``None`` gives the
  bare ``"<group or job name>"``; a group callable returning ``None`` drops out too, and a key
  that comes out blank that way leaves the job unlimited.
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa

from flask_solidq import identifiers
from flask_solidq.values import JobArgument

#: A key or group declaration: a literal, a callable over the job's arguments, or None/False;
#: any other value gives the bare key.
KeyDeclaration = object


class _Bare:
    """The type of :data:`BARE`."""

    def __repr__(self) -> str:
        return "flask_solidq.keys.BARE"


#: The ``key`` of a declaration that names none (``limits_rate(to=, per=)``): the bare budget,
#: ``"<group or job name>"``, as a key callable that returns None gives.
BARE: t.Final = _Bare()

#: The longest key the key columns take (``solidq_jobs.concurrency_key`` and
#: ``rate_limit_key``, the semaphores' and budgets' ``key``): VARCHAR(255) on every database.
MAX_KEY_LENGTH = identifiers.MAX_NAME_LENGTH


def check_length(key: str | None, job_name: str, what: str) -> None:
    """Refuse a key its column can't keep, the same on every database (SQLite would store
    it, PostgreSQL and MySQL refuse it), before anything is written: longer than the column
    takes, or holding a NUL character.

    :param what: the key's name in the message (``"concurrency key"``).
    :raises ValueError: ``key`` is longer than :data:`MAX_KEY_LENGTH` characters or holds a
        NUL. The message names the job and what is wrong, never the key (it is built from
        arguments).
    """
    if key is not None and identifiers.has_nul(key):
        raise ValueError(
            f"{job_name}'s {what} holds a NUL character (\\x00), which no database column"
            " keeps. Leave it out of what the key or group returns."
        )
    if key is not None and len(key) > MAX_KEY_LENGTH:
        raise ValueError(
            f"{job_name}'s {what} is {len(key)} characters long; its column takes at most"
            f" {MAX_KEY_LENGTH}. Shorten what the key or group returns (a hash of a long value,"
            " say)."
        )


def is_disabled(declaration: KeyDeclaration) -> bool:
    """Whether a ``key`` declaration turns its control off (``None`` or ``False``)."""
    return declaration is None or declaration is False


def evaluate(
    declaration: KeyDeclaration,
    args: tuple[JobArgument, ...],
    kwargs: t.Mapping[str, JobArgument],
) -> object:
    """The raw value of a declaration for one call: the literal, or the callable's result.

    Exceptions from a callable propagate: the enqueue fails with them, with nothing written.
    """
    if isinstance(declaration, str):
        return declaration
    if callable(declaration):
        return declaration(*args, **kwargs)
    return None


def render(value: object) -> str | None:
    """Turn a key's value into its string form, or ``None`` when nothing is left."""
    parts = list(_parts(value))
    return "/".join(parts) if parts else None


def build(
    scope: str | None,
    declaration: KeyDeclaration,
    args: tuple[JobArgument, ...],
    kwargs: t.Mapping[str, JobArgument],
) -> str:
    """The full key: ``scope`` (the group, or the job's name) joined with the key's value; the
    blank string when both are blank (the job is then not limited)."""
    rendered = render(evaluate(declaration, args, kwargs))
    return "/".join(part for part in (scope, rendered) if part is not None)


def scope(
    group: KeyDeclaration,
    job_name: str,
    args: tuple[JobArgument, ...],
    kwargs: t.Mapping[str, JobArgument],
) -> str | None:
    """The first part of a key: the job's name, or the group's value when one is declared
    (None when it comes out ``None``: it drops out, as Solid Queue compacts a nil group)."""
    if is_disabled(group):
        return job_name
    return render(evaluate(group, args, kwargs))


class Keyed:
    """What every control's declaration shares: a ``key`` and a ``group`` declaration, and
    the key a call gets from them."""

    key: KeyDeclaration
    group: KeyDeclaration

    @property
    def enabled(self) -> bool:
        """Whether the control is on (its ``key`` isn't ``None`` or ``False``)."""
        return not is_disabled(self.key)

    def key_for(
        self, job_name: str, args: tuple[JobArgument, ...], kwargs: dict[str, JobArgument]
    ) -> str | None:
        """The key a call with these arguments gets, or None when the control is off (the
        blank string when the key comes out blank: the job is then not limited)."""
        if not self.enabled:
            return None
        return build(scope(self.group, job_name, args, kwargs), self.key, args, kwargs)


def _parts(value: object) -> t.Iterator[str]:
    if value is None:
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _parts(item)
        return
    identity = _model_identity(value)
    if identity is not None:
        yield from identity
        return
    yield str(value)


def _model_identity(value: object) -> list[str] | None:
    if isinstance(value, (str, int, float)):
        return None
    state = sa.inspect(value, raiseerr=False)
    mapper = getattr(state, "mapper", None)
    if mapper is None or not hasattr(state, "identity"):
        return None
    primary_key = mapper.primary_key_from_instance(value)
    return [type(value).__name__, *(str(part) for part in primary_key)]
