"""Hiding secrets in job arguments from people: ``SOLIDQ_FILTER_ARGUMENTS``, as Rails'
``filter_parameters`` and Mission Control's ``filter_arguments``.

A keyword argument, or a dict key anywhere inside the arguments (nested dicts, dicts in
lists, the stored ``dict`` form of dicts with other keys), whose name contains one of the
configured words, case-insensitively, is shown as :data:`FILTERED`. Only what is shown is
filtered: the stored payload, and so the job a worker performs, keeps the real values.
Every read that shows arguments to people (the dashboard's, the CLI's, an error message that
quotes a stored value) passes them through :func:`current`.
"""

from __future__ import annotations

import dataclasses
import re
import typing as t

from flask import current_app
from flask import has_app_context

from flask_solidq.values import JSONValue

#: What a filtered value is shown as.
FILTERED = "[FILTERED]"

#: The default of ``SOLIDQ_FILTER_ARGUMENTS``.
DEFAULT_NAMES = ("password", "secret", "token", "api_key", "authorization", "cookie")

#: The tag of the argument codecs' stored forms, and the form of a dict with other keys.
_TAG = "_sq"
_DICT_FORM = "dict"


@dataclasses.dataclass(frozen=True)
class ArgumentFilter:
    """The words of ``SOLIDQ_FILTER_ARGUMENTS``, compiled once per app into one pattern."""

    names: tuple[str, ...]
    pattern: re.Pattern[str] | None

    @classmethod
    def of(cls, names: t.Iterable[str]) -> ArgumentFilter:
        """The filter of ``names``; none filters nothing."""
        names = tuple(names)
        if not names:
            return cls(names, None)
        words = "|".join(re.escape(name) for name in names)
        return cls(names, re.compile(words, re.IGNORECASE))

    def is_secret(self, key: object) -> bool:
        """Whether a value under ``key`` (an argument's name or a dict key) is hidden."""
        return self.pattern is not None and isinstance(key, str) and bool(self.pattern.search(key))

    @t.overload
    def filtered(self, value: dict[str, JSONValue]) -> dict[str, JSONValue]: ...
    @t.overload
    def filtered(self, value: JSONValue) -> JSONValue: ...
    def filtered(self, value: JSONValue) -> JSONValue:
        """A copy of ``value`` (arguments in their stored JSON form) with every value under
        a secret key replaced by :data:`FILTERED`; ``value`` itself when nothing is filtered.
        A dict comes back a dict."""
        if self.pattern is None:
            return value
        return self._walk(value)

    def filtered_payload(self, payload: JSONValue) -> JSONValue:
        """A stored job payload with its ``args`` and ``kwargs`` filtered (its own keys, the
        job's path and counters, are never an argument's)."""
        if self.pattern is None or not isinstance(payload, dict):
            return payload
        shown = dict(payload)
        for part in ("args", "kwargs"):
            if part in shown:
                shown[part] = self._walk(shown[part])
        return shown

    def _walk(self, value: JSONValue) -> JSONValue:
        if isinstance(value, list):
            return [self._walk(item) for item in value]
        if not isinstance(value, dict):
            return value
        pairs = value.get("v")
        if value.get(_TAG) == _DICT_FORM and isinstance(pairs, list):
            return {**value, "v": [self._pair(pair) for pair in pairs]}
        return {
            key: FILTERED if self.is_secret(key) else self._walk(item)
            for key, item in value.items()
        }

    def _pair(self, pair: JSONValue) -> JSONValue:
        """One ``[key, value]`` of the stored ``dict`` form."""
        if isinstance(pair, list) and len(pair) == 2:
            key, item = pair
            return [key, FILTERED if self.is_secret(key) else self._walk(item)]
        return self._walk(pair)


#: The filter of the default words, for a read made outside an app with flask-solidq.
DEFAULT = ArgumentFilter.of(DEFAULT_NAMES)


def current() -> ArgumentFilter:
    """The current app's filter (``Settings.filter_arguments``, compiled when the app was set
    up); the default words' outside an app with flask-solidq, so a read made there hides
    rather than shows."""
    if not has_app_context():
        return DEFAULT
    solidq = current_app.extensions.get("solidq")
    settings = getattr(solidq, "settings", None)
    shown = getattr(settings, "filter_arguments", None)
    return shown if isinstance(shown, ArgumentFilter) else DEFAULT
