"""``Coalesce``: what a ``coalesce`` declaration holds, as plain data a job class keeps
(:mod:`flask_solidq.definitions.declared`); the decorator and what enforces it are
:mod:`flask_solidq.controls.coalesce`'s."""

from __future__ import annotations

import dataclasses
import enum
import typing as t

from flask_solidq import current
from flask_solidq import keys
from flask_solidq.values import JobArgument

DEFAULT_MAX_CALLS = 100


class OnConflict(str, enum.Enum):
    """What a call does when its key already has a pending job."""

    DISCARD = "discard"
    REPLACE = "replace"
    COLLECT = "collect"


class OnFull(str, enum.Enum):
    """What a collecting job does when its last call fills it."""

    #: Keep waiting for its time.
    WAIT = "wait"
    #: Become ready at once.
    DISPATCH = "dispatch"


@dataclasses.dataclass(frozen=True)
class Coalesce(keys.Keyed):
    """A validated ``coalesce`` declaration."""

    key: keys.KeyDeclaration
    on_conflict: OnConflict
    max_calls: int | None
    on_full: OnFull | None
    debounce: float | None
    max_wait: float | None
    #: Coalesce keys are always the job's own: there is no group.
    group: keys.KeyDeclaration = dataclasses.field(default=None, init=False)

    def stored_key(
        self, job_name: str, args: tuple[JobArgument, ...], kwargs: dict[str, JobArgument]
    ) -> str:
        """The ``solidq_coalesce_keys.key`` of a call: never blank, since without a group it
        starts with the job's name. Inside a batch it starts with the batch
        (``Batch/7/ReindexProduct/42``): the same key in another batch, or in none,
        is another key.

        :raises ValueError: the key (with its batch's prefix) is longer than its column takes.
        """
        key = t.cast(str, self.key_for(job_name, args, kwargs))  # on: key_for gives a str
        batch = current.open_batch()
        if batch is None:
            keys.check_length(key, job_name, "coalesce key")
            return key
        key = f"{batch.key_prefix}{key}"
        what = f"coalesce key (with its batch's prefix {batch.key_prefix})"
        keys.check_length(key, job_name, what)
        return key
