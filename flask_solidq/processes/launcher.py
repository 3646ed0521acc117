"""Build the processes ``flask solidq work`` runs, from the app's settings and the command's
options, and run them under a supervisor.

Logging is set up here, before the supervisor forks (the command's handler and level, and the
log subscriber), so that every process it starts logs the same way.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import typing as t

from flask_solidq.config import WorkerSettings
from flask_solidq.config import worker_settings
from flask_solidq.controls.rate_limit import declaration as rate_limit_declaration
from flask_solidq.definitions import failure_rules
from flask_solidq.definitions import registry
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.logging.events import LogEvent
from flask_solidq.operations.queue_selector import QueueSelector
from flask_solidq.processes import pg_listener
from flask_solidq.processes.dispatcher import Dispatcher
from flask_solidq.processes.forks import ForkSupervisor
from flask_solidq.processes.once_worker import OnceWorker
from flask_solidq.processes.scheduler import Scheduler
from flask_solidq.processes.supervisor import RunnerSpec
from flask_solidq.processes.supervisor import Supervisor
from flask_solidq.processes.tally import Tally
from flask_solidq.processes.threads import ThreadSupervisor
from flask_solidq.processes.worker import Worker
from flask_solidq.recurring import tasks as recurring_tasks
from flask_solidq.values import MAINTENANCE_QUEUE
from flask_solidq.values import SupervisorMode

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.config import DispatcherSettings
    from flask_solidq.config import Settings

logger = logging.getLogger("flask_solidq")

MODES = SupervisorMode.ALL
KINDS = ("worker", "dispatcher", "scheduler")


@dataclasses.dataclass(frozen=True)
class WorkerOverrides:
    """``flask solidq work`` options that replace ``SOLIDQ_WORKERS`` with one worker."""

    queues: tuple[str, ...] | None = None
    threads: int | None = None
    processes: int | None = None
    polling_interval: float | None = None
    prefetch: int | None = None

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
    mode: str = SupervisorMode.FORK,
    only: str | None = None,
    overrides: WorkerOverrides = WorkerOverrides(),
    once: bool = False,
) -> Supervisor:
    """The supervisor of the configured processes; with ``once``, of the configured workers
    alone, each working off what is due and then stopping (``flask solidq work --once``).

    :raises ValueError: an unknown mode or kind, ``only`` with ``once``, or an invalid
        recurring task (its name says which), so a bad schedule fails at startup.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}.")
    if only is not None and only not in KINDS:
        raise ValueError(f"only must be one of {KINDS}, not {only!r}.")
    if once and only is not None:
        raise ValueError(
            "--once runs workers only (each dispatches the due jobs itself): leave out --only."
        )
    settings: Settings = app.extensions["solidq"].settings
    forked = mode == SupervisorMode.FORK
    specs = (
        once_specs(settings, overrides=overrides, forked=forked)
        if once
        else runner_specs(settings, only=only, overrides=overrides, forked=forked)
    )
    if not specs:
        raise ValueError(
            "Nothing to run: no workers, dispatchers or recurring tasks are configured."
        )
    log_subscriber.connect()
    pg_listener.warn_if_unheard(settings)
    if only in (None, "worker"):
        workers = overrides.apply(settings.workers)
        hint_unused_queues(workers, known_queues(settings))
        rate_limit_declaration.warn_whole_quota_bursts(registry.definitions())
        if settings.recurring and not once:
            warn_unserved_tasks(workers, _loadable_tasks(settings))
    supervisor_class = ForkSupervisor if forked else ThreadSupervisor
    return supervisor_class(app, specs, once=once)


def runner_specs(
    settings: Settings, *, only: str | None, overrides: WorkerOverrides, forked: bool
) -> list[RunnerSpec]:
    """The processes to run: each worker times its ``processes`` (in fork mode), each
    dispatcher, and the scheduler when there are recurring tasks."""
    specs: list[RunnerSpec] = []
    if only in (None, "worker"):
        for index, worker in enumerate(overrides.apply(settings.workers)):
            for copy in range(worker.processes if forked else 1):
                # Its start ledger: a slot per job its pool can hold (see pool.StartLedger).
                slots = worker.threads + worker.prefetch
                specs.append(
                    RunnerSpec(f"worker-{index}.{copy}", _worker(worker), ledger_slots=slots)
                )
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


def once_specs(settings: Settings, *, overrides: WorkerOverrides, forked: bool) -> list[RunnerSpec]:
    """The ``--once`` workers: each configured worker times its ``processes`` (in fork mode),
    as :func:`runner_specs` makes them, each with a tally of its own; no dispatcher, no
    scheduler."""
    batch_size = max((each.batch_size for each in settings.dispatchers), default=500)
    maintain = any(each.concurrency_maintenance for each in settings.dispatchers)
    specs: list[RunnerSpec] = []
    for index, worker in enumerate(overrides.apply(settings.workers)):
        for copy in range(worker.processes if forked else 1):
            tally = Tally()
            build = _once_worker(worker, tally, batch_size=batch_size, maintain=maintain)
            slots = worker.threads + worker.prefetch
            specs.append(
                RunnerSpec(f"worker-{index}.{copy}", build, ledger_slots=slots, tally=tally)
            )
    return specs


def _once_worker(
    worker: WorkerSettings, tally: Tally, *, batch_size: int, maintain: bool
) -> t.Callable[[Flask, int | None], OnceWorker]:
    return lambda app, supervisor_id: OnceWorker(
        app,
        worker,
        tally=tally,
        batch_size=batch_size,
        maintain_concurrency=maintain,
        supervisor_id=supervisor_id,
    )


def _dispatcher(dispatcher: DispatcherSettings) -> t.Callable[[Flask, int | None], Dispatcher]:
    return lambda app, supervisor_id: Dispatcher(app, dispatcher, supervisor_id=supervisor_id)


def _worker(worker: WorkerSettings) -> t.Callable[[Flask, int | None], Worker]:
    return lambda app, supervisor_id: Worker(app, worker, supervisor_id=supervisor_id)


def known_queues(settings: Settings) -> set[str]:
    """The queues this process knows jobs go to: each registered job definition's, its
    ``retry_on`` rules', and the recurring tasks'. Definitions the app hasn't imported yet
    are not known."""
    queues = {task.queue for task in settings.recurring if task.queue}
    for definition in registry.definitions():
        queues.add(definition.queue_name)
        for rule in definition._failure_rules:
            if isinstance(rule, failure_rules.RetryRule) and rule.queue:
                queues.add(rule.queue)
    return queues


def warn_unserved_tasks(
    workers: t.Iterable[WorkerSettings], tasks: t.Iterable[recurring_tasks.RecurringTask]
) -> None:
    """Warn once when a recurring task's queue is one none of this supervisor's workers
    claims from: its jobs would pile up unrun. The housekeeping tasks are the usual case: they
    run on ``solidq_maintenance``, which a worker listing its queues must name (or match with
    ``solidq_*``); until then finished jobs and idle budgets are never cleared."""
    selectors = [QueueSelector(tuple(worker.queues)) for worker in workers]
    unserved = {
        task.key: task.queue_name
        for task in tasks
        if not any(selector.matches(task.queue_name) for selector in selectors)
    }
    if not unserved:
        return
    logger.warning(
        "SolidQ no worker of this supervisor serves the queue of the recurring task(s) %s:"
        " their jobs will wait unrun. Add the queue to a worker's queues (the housekeeping"
        " tasks use %s), unless workers started elsewhere serve it",
        ", ".join(f"{key} (queue {json.dumps(queue)})" for key, queue in unserved.items()),
        json.dumps(MAINTENANCE_QUEUE),
        extra={
            "event": LogEvent.UNSERVED_QUEUE.value,
            "tasks": unserved,
        },
    )


def _loadable_tasks(settings: Settings) -> list[recurring_tasks.RecurringTask]:
    """The configured recurring tasks, or none when one is invalid: a supervisor running only
    workers doesn't refuse to start for it (the scheduler's does)."""
    try:
        return recurring_tasks.load_all(settings.recurring)
    except ValueError:
        return []


def hint_unused_queues(workers: t.Iterable[WorkerSettings], known: set[str]) -> None:
    """Warn, once per name, of a worker's queue no known job uses: a typo there would leave
    the queue's jobs waiting, silently. ``*`` and ``prefix*`` never warn."""
    names = dict.fromkeys(name for worker in workers for name in worker.queues)
    for name in names:
        if name.endswith("*") or name in known:
            continue
        logger.warning(
            "SolidQ no job definition uses the queue %s (%s): is it a typo? Jobs sent there"
            " with .set(queue=...) still run",
            json.dumps(name),
            "known: " + ", ".join(json.dumps(queue) for queue in sorted(known))
            if known
            else "no job definition is imported",
            extra={
                "event": LogEvent.UNUSED_QUEUE.value,
                "queue": name,
                "known_queues": sorted(known),
            },
        )
