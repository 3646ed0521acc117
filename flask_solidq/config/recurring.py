"""``SOLIDQ_RECURRING``: the recurring tasks' entries, checked and parsed into
:class:`RecurringSettings` (their schedules are parsed when the scheduler starts)."""

from __future__ import annotations

import dataclasses

from flask_solidq import identifiers
from flask_solidq.values import JobArgument


@dataclasses.dataclass(frozen=True)
class RecurringSettings:
    """One entry of ``SOLIDQ_RECURRING``; the schedule is parsed when the scheduler starts."""

    key: str
    job: str
    schedule: str
    args: tuple[JobArgument, ...] = ()
    kwargs: dict[str, JobArgument] = dataclasses.field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None
    description: str | None = None


RECURRING_KEYS = ("job", "schedule", "args", "kwargs", "queue", "priority", "description")


def parse_recurring(value: object) -> tuple[RecurringSettings, ...]:
    """Parse ``SOLIDQ_RECURRING``: each task's entry checked, its schedule left as text."""
    if not isinstance(value, dict):
        raise TypeError(
            "SOLIDQ_RECURRING must be a dict of task name -> "
            '{"job": "module:attr", "schedule": "every minute", ...}, '
            f"not {type(value).__name__}."
        )
    tasks = []
    for key, entry in value.items():
        name = f"SOLIDQ_RECURRING[{key!r}]"
        problem = identifiers.name_problem(str(key), "task name")
        if problem is not None:
            raise ValueError(f"{name}: {problem}")
        if not isinstance(entry, dict):
            raise TypeError(f"{name} must be a dict, not {type(entry).__name__}.")
        unknown = sorted(set(entry) - set(RECURRING_KEYS))
        if unknown:
            raise ValueError(f"{name} has unknown keys {unknown}; it takes {list(RECURRING_KEYS)}.")
        for required in ("job", "schedule"):
            if not isinstance(entry.get(required), str) or not entry[required].strip():
                raise ValueError(f"{name} needs {required!r}, a non-empty string.")
        args = entry.get("args", ())
        if not isinstance(args, (list, tuple)):
            args = (args,)
        kwargs = entry.get("kwargs", {})
        if not isinstance(kwargs, dict):
            raise TypeError(f"{name}['kwargs'] must be a dict.")
        priority = entry.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise TypeError(f"{name}['priority'] must be an int.")
        tasks.append(
            RecurringSettings(
                key=str(key),
                job=entry["job"].strip(),
                schedule=entry["schedule"].strip(),
                args=tuple(args),
                kwargs=dict(kwargs),
                queue=entry.get("queue"),
                priority=priority,
                description=entry.get("description"),
            )
        )
    return tuple(tasks)
