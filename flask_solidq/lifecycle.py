"""Lifecycle hooks: the functions ``@solidq.on_process_start``, ``on_worker_start`` and
``on_worker_stop`` register, and running them in a queue process
(:class:`~flask_solidq.processes.base.Runnable` calls them). A module of its own, with no
imports from the rest of the package, so the extension and the per-app state can hold the
hooks without importing the processes."""

from __future__ import annotations

import dataclasses
import enum
import typing as t


class Lifecycle(str, enum.Enum):
    """The moments a lifecycle hook runs at, named as the ``SolidQ`` decorators are."""

    PROCESS_START = "on_process_start"
    WORKER_START = "on_worker_start"
    WORKER_STOP = "on_worker_stop"


@dataclasses.dataclass(frozen=True)
class ProcessInfo:
    """What a lifecycle hook is told of the process it runs in."""

    #: ``"Worker"``, ``"Dispatcher"`` or ``"Scheduler"``, as ``solidq_processes.kind``.
    kind: str
    #: The process's name, as ``solidq_processes.name`` (unique; in thread mode, the only
    #: thing telling the process threads of one OS process apart).
    name: str
    pid: int
    #: What it registers about itself: a worker's ``queues``, ``threads``... (Any: the hooks
    #: read each key as the type they know it has).
    metadata: t.Mapping[str, t.Any]


#: A lifecycle hook: called with the process it runs in; what it returns is ignored.
Hook = t.Callable[[ProcessInfo], object]
H = t.TypeVar("H", bound=Hook)


class HookFailed(RuntimeError):
    """A lifecycle hook raised (the error is chained): the process it ran in stops."""


class LifecycleHooks:
    """The lifecycle hooks registered on one ``SolidQ`` object, in registration order.

    They belong to the object, not to an app, as job definitions do: registered at import
    (``@solidq.on_worker_start``), usually before any app exists, they run in the processes of
    every app the object serves.
    """

    def __init__(self) -> None:
        self._hooks: dict[Lifecycle, list[Hook]] = {moment: [] for moment in Lifecycle}

    def add(self, moment: Lifecycle, hook: H) -> H:
        """Register ``hook`` to run at ``moment``; return it, so this works as a decorator.

        :raises TypeError: ``hook`` is not callable.
        """
        if not callable(hook):
            raise TypeError(
                f"@solidq.{moment.value} registers a function called with the process,"
                f" not {hook!r}."
            )
        self._hooks[moment].append(hook)
        return hook

    def run(self, moment: Lifecycle, process: ProcessInfo) -> None:
        """Call the hooks of ``moment`` with ``process``, in order.

        :raises HookFailed: a hook raised; the later ones didn't run.
        """
        for hook in list(self._hooks[moment]):
            try:
                hook(process)
            except Exception as error:
                raise HookFailed(
                    f"The {moment.value} hook {_hook_name(hook)} raised"
                    f" {type(error).__name__}: {error}; {process.kind} {process.name} stops."
                ) from error


def _hook_name(hook: Hook) -> str:
    module = getattr(hook, "__module__", None)
    name = getattr(hook, "__qualname__", None) or repr(hook)
    return f"{module}.{name}" if module else name
