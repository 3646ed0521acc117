"""A job's step progress as the dashboard and ``flask solidq job ID`` show it, read from its
stored payload (see :mod:`flask_solidq.definitions.steps`): the steps done, the current one
and its cursor, and how many times the job resumed."""

from __future__ import annotations

import dataclasses
import json


@dataclasses.dataclass(frozen=True)
class StepProgress:
    """What a payload says of a job's steps."""

    done: tuple[str, ...]
    #: The step in progress, or None between steps.
    current: str | None
    #: Its cursor as stored (JSON text: the argument codecs' form), or None.
    cursor: str | None
    resumptions: int

    @property
    def states(self) -> list[tuple[str, str]]:
        """Each step the job reached and its state, in order: ``("prepare", "done")``,
        ``("embed", "in progress at cursor 1200")``. Steps not reached yet are not named in
        the payload, so not listed."""
        states = [(name, "done") for name in self.done]
        if self.current is not None:
            states.append((self.current, f"in progress at cursor {self.cursor}"))
        return states


def of(payload: object) -> StepProgress | None:
    """The step progress of a parsed payload; None for a job without steps, or for one whose
    progress is malformed (the payload, shown whole, says what is there)."""
    if not isinstance(payload, dict) or ("steps" not in payload and "resumptions" not in payload):
        return None
    steps = payload.get("steps", {})
    resumptions = payload.get("resumptions", 0)
    if not isinstance(steps, dict) or type(resumptions) is not int:
        return None
    done = steps.get("done", [])
    current = steps.get("current")
    if not isinstance(done, list) or not (current is None or _is_current(current)):
        return None
    return StepProgress(
        done=tuple(str(name) for name in done),
        current=None if current is None else current[0],
        cursor=None if current is None else json.dumps(current[1], ensure_ascii=False),
        resumptions=resumptions,
    )


def _is_current(value: object) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
