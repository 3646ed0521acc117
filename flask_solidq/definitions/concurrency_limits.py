"""``ConcurrencyLimit``: what a ``limits_concurrency`` declaration holds, as plain data a job
class keeps (:mod:`flask_solidq.definitions.declared`); the decorator and what enforces it
are :mod:`flask_solidq.controls.concurrency`'s."""

from __future__ import annotations

import dataclasses
import enum

from flask_solidq import keys
from flask_solidq.values import JobArgument

DEFAULT_DURATION = 180.0


class OnConflict(str, enum.Enum):
    """What a job does when its concurrency key has no free slot."""

    #: Wait as a blocked execution until a slot frees.
    BLOCK = "block"
    #: Destroy the job in the enqueue's (or dispatch's) own transaction.
    DISCARD = "discard"


@dataclasses.dataclass(frozen=True)
class ConcurrencyLimit(keys.Keyed):
    """A validated ``limits_concurrency`` declaration."""

    to: int
    key: keys.KeyDeclaration
    duration: float
    group: keys.KeyDeclaration
    on_conflict: OnConflict

    def stored_key(
        self, job_name: str, args: tuple[JobArgument, ...], kwargs: dict[str, JobArgument]
    ) -> str | None:
        """The ``solidq_jobs.concurrency_key`` of a call: None when the key comes out blank
        (the job is then not limited, and never blocks).

        :raises ValueError: the key is longer than its column takes.
        """
        key = self.key_for(job_name, args, kwargs) or None
        keys.check_length(key, job_name, "concurrency key")
        return key
