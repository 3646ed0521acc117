"""The job registry: job name -> job definition, for the whole process.

Job names are global to a process (they are what ``solidq_jobs.class_name`` stores), so the
registry is too. A stored job also carries its definition's import path, so a worker that never
imported the job's module loads it on demand.
"""

from __future__ import annotations

import inspect
import json
import threading

from flask_solidq import errors
from flask_solidq.definitions import arguments
from flask_solidq.definitions import job as job_module
from flask_solidq.definitions.job import Job

_definitions: dict[str, type[Job]] = {}
_lock = threading.Lock()


def register(job_class: type[Job]) -> None:
    """Register ``job_class`` under its name.

    Registering again the definition found at the same import path (a module imported twice, a
    reload) replaces the old one.

    :raises ValueError: another definition, elsewhere, already has this name.
    """
    name = job_class.job_name
    with _lock:
        existing = _definitions.get(name)
        if existing is not None and existing is not job_class:
            if arguments.import_path(existing) != arguments.import_path(job_class):
                raise ValueError(
                    f"Two jobs are named {name!r}: {_place(existing)} and {_place(job_class)}."
                    " Rename one, or give it name=... (@solidq.job(name=...) or"
                    " class X(solidq.Job, name=...))."
                )
        _definitions[name] = job_class


def unregister(job_class: type[Job]) -> None:
    """Forget ``job_class`` (for tests that define jobs on the fly)."""
    with _lock:
        if _definitions.get(job_class.job_name) is job_class:
            del _definitions[job_class.job_name]


#: What to do about a stored job whose name no definition has, said by :func:`lookup`.
RENAMED_ADVICE = (
    " A stored job runs the definition registered under its name: if the job was renamed, give"
    " the definition its old name back (name=...) or define the old name beside the new until"
    " the jobs stored under it have run; if it was removed, define it again or discard its"
    " jobs. Then retry the failed ones (flask solidq retry --all --job NAME, or the dashboard)."
)


def lookup(name: str, path: str | None = None) -> type[Job]:
    """The definition registered as ``name``, importing ``path`` first if it isn't yet.

    :raises flask_solidq.errors.JobNotFound: neither the registry nor the import path has it;
        the message names the job, what its import path holds now, and what to do
        (:data:`RENAMED_ADVICE`).
    """
    job_class = _definitions.get(name)
    if job_class is None and path:
        try:
            arguments.load_import_path(path)
        except Exception as exc:
            raise errors.JobNotFound(
                f"The job {name!r} isn't defined in this process, and importing {path!r}"
                f" failed: {str(exc).rstrip('.')}.{RENAMED_ADVICE}"
            ) from exc
        job_class = _definitions.get(name)
    if job_class is None:
        raise errors.JobNotFound(
            f"The job {name!r} isn't defined in this process{_what_path_holds(path)}."
            + RENAMED_ADVICE
        )
    return job_class


def _what_path_holds(path: str | None) -> str:
    """Of a stored job's import path that didn't define its name: what it defines now."""
    if not path:
        return ""
    found = arguments.load_import_path(path)
    now = getattr(found, "job_name", None)
    if isinstance(now, str):
        return f" (its import path {path!r} now defines the job {now!r})"
    return f" (its import path {path!r} didn't define it)"


def find(name: str, payload: str | None = None) -> type[Job] | None:
    """The definition registered as ``name``, importing the import path a stored payload
    (``solidq_jobs.arguments``) names when it isn't registered yet; None when neither has it
    (the controls then treat the job as one they don't limit, as Solid Queue does)."""
    job_class = _definitions.get(name)
    if job_class is not None:
        return job_class
    try:
        return lookup(name, _payload_import_path(payload))
    except errors.JobNotFound:
        return None


def _payload_import_path(payload: str | None) -> str | None:
    try:
        path = json.loads(payload or "{}").get("job")
    except (ValueError, AttributeError):
        return None
    return path if isinstance(path, str) else None


def definitions() -> list[type[Job]]:
    """Every registered definition."""
    return list(_definitions.values())


def is_registered(name: str) -> bool:
    """Whether a definition named ``name`` is registered in this process."""
    return name in _definitions


def names() -> list[str]:
    """The names of every registered job, sorted."""
    return sorted(_definitions)


def _place(job_class: type[Job]) -> str:
    target = getattr(job_class, "function", None) or job_class
    try:
        filename = inspect.getsourcefile(target)
        line = inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        return arguments.import_path(job_class)
    return f"{arguments.import_path(job_class)} ({filename}:{line})"


#: Every job class made from now on registers here.
job_module.REGISTER.fill(register)
