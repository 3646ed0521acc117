"""``Call``: one call of a collecting job, as ``perform_calls`` receives it."""

from __future__ import annotations

import dataclasses
import types
import typing as t


@dataclasses.dataclass(frozen=True)
class Call:
    """One call joined to a collecting job.

    ``id`` is the stored call's id (None under ``perform_now`` and the inline and test
    adapters), ``args`` and ``kwargs`` its arguments, ``job_data`` the payload stored for it,
    read-only.
    """

    id: int | None
    args: tuple[t.Any, ...]
    kwargs: dict[str, t.Any]
    job_data: types.MappingProxyType[str, t.Any]

    @property
    def arguments(self) -> tuple[t.Any, ...]:
        """The call's positional arguments (the seeds' name for ``args``)."""
        return self.args
