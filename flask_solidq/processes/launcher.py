"""Build the processes ``flask solidq work`` runs, from the app's settings and the command's
options, and run them under a supervisor."""

from __future__ import annotations

import dataclasses
import typing as t

from flask_solidq import log_subscriber
from flask_solidq.config import WorkerSettings
from flask_solidq.config import worker_settings
from flask_solidq.processes.dispatcher import Dispatcher
from flask_solidq.processes.scheduler import Scheduler
from flask_solidq.processes.supervisor import ForkSupervisor
from flask_solidq.processes.supervisor import RunnerSpec
from flask_solidq.processes.supervisor import Supervisor
from flask_solidq.processes.supervisor import ThreadSupervisor
from flask_solidq.processes.worker import Worker
from flask_solidq.recurring import tasks as recurring_tasks

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.config import DispatcherSettings
    from flask_solidq.config import Settings

MODES = ("fork", "thread")
KINDS = ("worker", "dispatcher", "scheduler")


@dataclasses.dataclass(frozen=True)
class WorkerOverrides:
    """``flask solidq work`` options that replace ``SOLIDQ_WORKERS`` with one worker."""

    queues: tuple[str, ...] | None = None
    threads: int | None = None
    processes: int | None = None
    polling_interval: float | None = None

    @property
    def given(self) -> bool:
        return any(value is not None for value in dataclasses.astuple(self))

    def apply(self, workers: tuple[WorkerSettings, ...]) -> tuple[WorkerSettings, ...]:
        """One worker: the first configured one (or the default) with these options."""
        if not self.given:
            return workers
        base = workers[0] if workers else worker_settings({})
        changes = {
            name: value for name, value in dataclasses.asdict(self).items() if value is not None
        }
        return (dataclasses.replace(base, **changes),)


def supervisor(
    app: Flask,
    *,
    mode: str = "fork",
    only: str | None = None,
    overrides: WorkerOverrides = WorkerOverrides(),
) -> Supervisor:
    """The supervisor of the configured processes.

    :raises ValueError: an unknown mode or kind, or an invalid recurring task (its name says
        which), so a bad schedule fails at startup.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}.")
    if only is not None and only not in KINDS:
        raise ValueError(f"only must be one of {KINDS}, not {only!r}.")
    settings: Settings = app.extensions["solidq"].settings
    specs = runner_specs(settings, only=only, overrides=overrides, forked=mode == "fork")
    if not specs:
        raise ValueError(
            "Nothing to run: no workers, dispatchers or recurring tasks are configured."
        )
    log_subscriber.connect()
    supervisor_class = ForkSupervisor if mode == "fork" else ThreadSupervisor
    return supervisor_class(app, specs)


def runner_specs(
    settings: Settings, *, only: str | None, overrides: WorkerOverrides, forked: bool
) -> list[RunnerSpec]:
    """The processes to run: each worker times its ``processes`` (in fork mode), each
    dispatcher, and the scheduler when there are recurring tasks."""
    specs: list[RunnerSpec] = []
    if only in (None, "worker"):
        for index, worker in enumerate(overrides.apply(settings.workers)):
            for copy in range(worker.processes if forked else 1):
                specs.append(RunnerSpec(f"worker-{index}.{copy}", _worker(worker)))
    if only in (None, "dispatcher"):
        for index, dispatcher in enumerate(settings.dispatchers):
            specs.append(RunnerSpec(f"dispatcher-{index}", _dispatcher(dispatcher)))
    if only in (None, "scheduler") and settings.recurring:
        tasks = recurring_tasks.load_all(settings.recurring)
        specs.append(
            RunnerSpec(
                "scheduler",
                lambda app, supervisor_id: Scheduler(app, tasks, supervisor_id=supervisor_id),
            )
        )
    return specs


def _dispatcher(dispatcher: DispatcherSettings) -> t.Callable[[Flask, int | None], Dispatcher]:
    return lambda app, supervisor_id: Dispatcher(app, dispatcher, supervisor_id=supervisor_id)


def _worker(worker: WorkerSettings) -> t.Callable[[Flask, int | None], Worker]:
    return lambda app, supervisor_id: Worker(app, worker, supervisor_id=supervisor_id)
