"""The check every enqueue makes of a job's arguments: they must fit what a worker will call
(``perform``; a function job's function), so a wrong call fails at the enqueue, not in a
worker later."""

from __future__ import annotations

import inspect
import types
import typing as t

from flask_solidq.definitions import signatures
from flask_solidq.definitions.declared import DeclaredAttributes
from flask_solidq.values import JobArgument

#: A definition's performer and its parameters, as last read (see ``_performer_parameters``).
_ParametersCache = tuple[t.Callable[..., object], "signatures.Parameters | None"]


class ArgumentChecks(DeclaredAttributes):
    """The part of a job definition that checks an enqueue's arguments against its performer."""

    #: (the performer they were read from, its parameters): see ``_performer_parameters``.
    _parameters_cache: t.ClassVar[_ParametersCache | None] = None

    @classmethod
    def _check_arguments(
        cls,
        args: tuple[JobArgument, ...],
        kwargs: t.Mapping[str, JobArgument],
        position: int | None = None,
    ) -> None:
        """Raise ``TypeError`` unless a worker could call the job with these arguments:
        bind them to the signature of what it calls (``perform``, less ``self``; the function
        of ``@solidq.job``), so a wrong call fails at the enqueue, not in a worker later.

        A collecting job (``coalesce(on_conflict="collect")``) is not checked: its function
        takes ``calls``, and each call's own arguments are free-form, read by that function.

        :param position: the job's place in a bulk enqueue, for the message.
        :raises TypeError: the arguments don't fit; the message names the job and the reason.
        """
        if cls.is_collecting():
            return
        parameters = cls._performer_parameters()
        if parameters is None:
            return
        try:
            parameters.bind(args, kwargs)
        except TypeError as exc:
            at = "" if position is None else f" (at position {position})"
            raise TypeError(
                f"Job {cls.job_name!r}{at} can't take these arguments: {exc}. A worker would call"
                f" {signatures.describe_call(cls._performer(), parameters.signature)}; nothing was"
                " enqueued."
            ) from None

    @classmethod
    def _performer(cls) -> t.Callable[..., object]:
        """What a worker calls with the job's arguments; its signature is what they must fit.
        Job and FunctionJob say which."""
        raise NotImplementedError

    @classmethod
    def _read_signature(cls, performer: t.Callable[..., object]) -> inspect.Signature | None:
        """``perform``'s signature as a worker calls it (bound to the job: without ``self``);
        None when it can't be read (a builtin), and then the arguments aren't checked."""
        signature = signatures.signature_or_none(performer)
        raw = inspect.getattr_static(cls, "perform", None)
        if signature is None or not isinstance(raw, types.FunctionType):
            return signature  # a staticmethod or classmethod: no self to drop
        parameters = list(signature.parameters.values())
        if parameters and parameters[0].kind in signatures.POSITIONAL:
            parameters = parameters[1:]
        return signature.replace(parameters=parameters)

    @classmethod
    def _performer_parameters(cls) -> signatures.Parameters | None:
        """The parameters of ``_performer()``, read once per definition, since every enqueue
        binds to them; read again if the performer was replaced (a test's monkeypatch)."""
        performer = cls._performer()
        cached = cls._parameters_cache
        if cached is not None and cached[0] == performer:
            return cached[1]
        signature = cls._read_signature(performer)
        parameters = None if signature is None else signatures.Parameters.of(signature)
        cls._parameters_cache = (performer, parameters)
        return parameters
