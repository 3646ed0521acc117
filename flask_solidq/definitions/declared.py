"""What a job definition declared with the control decorators: one frozen object per class.

``limits_rate``, ``limits_concurrency``, ``coalesce``, ``retry_on`` and ``discard_on`` each
give the class they decorate a new :class:`Declared` holding their declaration
(:func:`declare_on`, a ``dataclasses.replace`` of the one it had). The new object is set on
that class only: a subclass reads its parent's until it declares something itself, and a
declaration on the subclass never changes the parent. Seventeen class attributes set one by one
could disagree with each other (one decorator half applied, a test patching one of them); one
object replaced whole can't, and type checkers follow its assignment without ``type: ignore``.

The attributes API.md names (``rate_limit_to``, ``concurrency_limit``, ``coalesce_key``...) and
the ones the package reads (``_rate_limit``, ``_concurrency_limit``, ``_coalesce``,
``_failure_rules``) are read-only views of that object, on :class:`DeclaredAttributes`, which
``Job`` inherits; so are the keys a call would get (``rate_limit_key_for``...).

The declarations themselves (``RateLimit``, ``ConcurrencyLimit``, ``Coalesce``) are plain values
of their own modules here (:mod:`.rate_limits`, :mod:`.concurrency_limits`, :mod:`.coalescing`);
the decorators that make them and the controls that act on them are a layer above.
"""

from __future__ import annotations

import dataclasses
import functools
import typing as t

from flask_solidq.values import JobArgument

if t.TYPE_CHECKING:
    from flask_solidq.definitions.coalescing import Coalesce
    from flask_solidq.definitions.concurrency_limits import ConcurrencyLimit
    from flask_solidq.definitions.failure_rules import DiscardRule
    from flask_solidq.definitions.failure_rules import RetryRule
    from flask_solidq.definitions.rate_limits import RateLimit
    from flask_solidq.keys import KeyDeclaration
    from flask_solidq.keys import Keyed

T = t.TypeVar("T")

#: The controls a class may declare once each (``"rate_limit"``, ``"concurrency_limit"``,
#: ``"coalesce"``): the names of their fields in :class:`Declared`.
Control = t.Literal["rate_limit", "concurrency_limit", "coalesce"]


@dataclasses.dataclass(frozen=True)
class Declared:
    """The declarations of one job definition, inherited ones included.

    A control's field holds its declaration as written, a switched-off one too (``key=None``
    or ``False``, in a subclass say): the read-back attributes still show its ``key``. The
    ``active_*`` properties give it only while it is on, as the package reads it.
    """

    #: The main rate limit: the one without a name, else the first written (see
    #: ``rate_limit.stacked``); its budget key is the job's ``rate_limit_key``.
    rate_limit: RateLimit | None = None
    #: Every rate limit, in the order written (stacked ``limits_rate`` with distinct names).
    rate_limits: tuple[RateLimit, ...] = ()
    concurrency_limit: ConcurrencyLimit | None = None
    coalesce: Coalesce | None = None
    #: ``retry_on`` and ``discard_on`` rules in the order applied: inherited ones first, and
    #: the last that matches wins (see ``failures.find_rule``).
    failure_rules: tuple[RetryRule | DiscardRule, ...] = ()
    #: The controls declared by the class holding this object itself, not inherited: each
    #: control may be declared once per class.
    own: frozenset[Control] = frozenset()

    # Cached: the enqueue reads them for every job, as ``cls._declared.active_*`` (a frozen
    # dataclass without slots keeps a __dict__, which is where cached_property stores them).
    # Through the views below a read costs about 0.15 µs more (a Python __get__), which the
    # enqueue's and the claim's per-job hooks don't pay.

    @functools.cached_property
    def active_rate_limit(self) -> RateLimit | None:
        """The main rate limit while it is on, else the first stacked one that is."""
        limits = self.active_rate_limits
        return limits[0] if limits else None

    @functools.cached_property
    def active_rate_limits(self) -> tuple[RateLimit, ...]:
        """The rate limits switched on, the main one first."""
        main = _active(self.rate_limit)
        rest = tuple(limit for limit in self.rate_limits if limit.enabled and limit is not main)
        return rest if main is None else (main, *rest)

    @functools.cached_property
    def active_concurrency_limit(self) -> ConcurrencyLimit | None:
        return _active(self.concurrency_limit)

    @functools.cached_property
    def active_coalesce(self) -> Coalesce | None:
        return _active(self.coalesce)


KeyedT = t.TypeVar("KeyedT", bound="Keyed")


def _active(declaration: KeyedT | None) -> KeyedT | None:
    return declaration if declaration is not None and declaration.enabled else None


def declares_own(job_class: type[DeclaredAttributes], control: Control) -> bool:
    """Whether ``job_class`` itself (not a parent) already declared ``control``."""
    own = job_class.__dict__.get("_declared")
    return own is not None and control in own.own


def declare_on(
    job_class: type[DeclaredAttributes],
    control: Control | None = None,
    **changes: t.Any,  # fields of Declared, each of its own type
) -> None:
    """Give ``job_class`` (only) a copy of its :class:`Declared` with ``changes``.

    :param control: the control being declared, recorded as the class's own.
    """
    mine = job_class.__dict__.get("_declared")
    own: frozenset[Control] = mine.own if mine is not None else frozenset()
    if control is not None:
        own |= {control}
    job_class._declared = dataclasses.replace(job_class._declared, own=own, **changes)


class View(t.Generic[T]):
    """A read-only attribute of a job definition and of its jobs, read from its
    :class:`Declared`. Assigning it on a job raises; a decorator is how it is declared."""

    def __init__(self, read: t.Callable[[Declared], T]) -> None:
        self._read = read

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, instance: object, owner: type[DeclaredAttributes]) -> T:
        return self._read(owner._declared)

    def __set__(self, instance: object, value: object) -> t.NoReturn:
        raise AttributeError(
            f"{self._name} is read-only: it reads back what the control decorators declared."
        )


DeclarationT = t.TypeVar("DeclarationT", bound="Keyed")


def _option(
    control: t.Callable[[Declared], DeclarationT | None],
    option: t.Callable[[DeclarationT], T | None],
    *,
    while_off: bool = False,
) -> View[T | None]:
    """The view of one option of a control (``option`` reads it from the declaration that
    ``control`` finds): None without the declaration, or, unless ``while_off``, while it is
    switched off."""

    def read(declared: Declared) -> T | None:
        declaration = control(declared)
        if declaration is None or not (while_off or declaration.enabled):
            return None
        return option(declaration)

    return View(read)


def _rate_limit_of(declared: Declared) -> RateLimit | None:
    return declared.rate_limit


def _concurrency_limit_of(declared: Declared) -> ConcurrencyLimit | None:
    return declared.concurrency_limit


def _coalesce_of(declared: Declared) -> Coalesce | None:
    return declared.coalesce


class DeclaredAttributes:
    """The attributes a job definition (and each of its jobs) reads its declarations by."""

    _declared: t.ClassVar[Declared] = Declared()

    _rate_limit: View[RateLimit | None] = View(lambda declared: declared.active_rate_limit)
    _concurrency_limit: View[ConcurrencyLimit | None] = View(
        lambda declared: declared.active_concurrency_limit
    )
    _coalesce: View[Coalesce | None] = View(lambda declared: declared.active_coalesce)
    _failure_rules: View[tuple[RetryRule | DiscardRule, ...]] = View(
        lambda declared: declared.failure_rules
    )

    # The read-back attributes of API.md, section 2.
    rate_limit_to: View[int | None] = _option(_rate_limit_of, lambda limit: limit.to)
    rate_limit_per: View[float | None] = _option(_rate_limit_of, lambda limit: limit.per)
    rate_limit_burst: View[int | None] = _option(_rate_limit_of, lambda limit: limit.burst)
    rate_limit_key: View[KeyDeclaration] = _option(
        _rate_limit_of, lambda limit: limit.key, while_off=True
    )
    rate_limit_group: View[KeyDeclaration] = _option(
        _rate_limit_of, lambda limit: limit.group, while_off=True
    )
    rate_limited: View[bool] = View(lambda declared: declared.active_rate_limit is not None)
    #: Every rate limit switched on, the main one first (stacked ``limits_rate``).
    rate_limits: View[tuple[RateLimit, ...]] = View(lambda declared: declared.active_rate_limits)
    coalesce_key: View[KeyDeclaration] = _option(_coalesce_of, lambda c: c.key, while_off=True)
    coalesce_on_conflict: View[str | None] = _option(_coalesce_of, lambda c: c.on_conflict)
    coalesce_max_calls: View[int | None] = _option(_coalesce_of, lambda c: c.max_calls)
    coalesce_on_full: View[str | None] = _option(_coalesce_of, lambda c: c.on_full)
    coalesce_debounce: View[float | None] = _option(_coalesce_of, lambda c: c.debounce)
    coalesce_max_wait: View[float | None] = _option(_coalesce_of, lambda c: c.max_wait)
    concurrency_limit: View[int | None] = _option(_concurrency_limit_of, lambda limit: limit.to)
    concurrency_key: View[KeyDeclaration] = _option(
        _concurrency_limit_of, lambda limit: limit.key, while_off=True
    )
    concurrency_duration: View[float | None] = _option(
        _concurrency_limit_of, lambda limit: limit.duration, while_off=True
    )
    concurrency_group: View[KeyDeclaration] = _option(
        _concurrency_limit_of, lambda limit: limit.group, while_off=True
    )
    concurrency_on_conflict: View[str | None] = _option(
        _concurrency_limit_of, lambda limit: limit.on_conflict, while_off=True
    )

    #: Set by ``Job`` (see there): it starts every control's key.
    job_name: t.ClassVar[str]

    @classmethod
    def is_collecting(cls) -> bool:
        """Whether the definition collects calls (``coalesce(on_conflict="collect")``)."""
        declaration = cls._declared.active_coalesce
        return declaration is not None and declaration.on_conflict == "collect"

    # The keys a call would get, from the declaration in force (``keys.Keyed.key_for``).

    @classmethod
    def rate_limit_key_for(cls, *args: JobArgument, **kwargs: JobArgument) -> str | None:
        """The budget key a call with these arguments uses: None without a rate limit, or when
        the key comes out blank (the call is then not limited)."""
        limit = cls._declared.active_rate_limit
        return (limit.key_for(cls.job_name, args, kwargs) or None) if limit else None

    @classmethod
    def concurrency_key_for(cls, *args: JobArgument, **kwargs: JobArgument) -> str | None:
        """The concurrency key a call with these arguments uses: None without a limit, or when
        the key comes out blank (the call is then not limited)."""
        limit = cls._declared.active_concurrency_limit
        return (limit.key_for(cls.job_name, args, kwargs) or None) if limit else None

    @classmethod
    def coalesce_key_for(cls, *args: JobArgument, **kwargs: JobArgument) -> str | None:
        """The coalesce key a call with these arguments uses (None without coalescing)."""
        declaration = cls._declared.active_coalesce
        return declaration.key_for(cls.job_name, args, kwargs) if declaration else None
