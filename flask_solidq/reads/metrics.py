"""The queue's figures in Prometheus's format, for the dashboard's ``/metrics`` and
``flask solidq metrics`` (node_exporter's textfile collector).

Every figure is read from the database when it is scraped (:class:`QueueCollector`, in a
fresh registry per scrape), so any web process or host answers the same, and nothing is
counted in memory: a worker's counters would be lost with it and differ between processes.
For the same reason there are no counters: finished jobs are cleared, failed ones retried or
discarded, so a count of rows can go down, which Prometheus would read as a counter reset.
Jobs finished or failed lately are gauges over the last hour instead, read along an index.

Labels stay few: job names and process kinds are bounded by the app's code; queues can be
one per tenant, so only the ``SOLIDQ_METRICS_MAX_QUEUES`` with the most jobs are labelled and
the rest add up under ``queue="other"`` (:mod:`flask_solidq.reads.largest_queues`); budgets
can be one per account, so only the :data:`MAX_BUDGETS` with the most waiting jobs are named
and the rest add up under ``budget="(other)"``. No job ids, no coalesce keys.

prometheus_client is an optional extra (``pip install "flask-solidq[metrics]"``); the figures
(:func:`read_figures`) need only the database.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq.controls.rate_limit import budgets
from flask_solidq.errors import SolidQError
from flask_solidq.models.tables import FAILED
from flask_solidq.operations.processes import process_rows
from flask_solidq.reads import largest_queues
from flask_solidq.reads import queue_figures
from flask_solidq.reads import throughput
from flask_solidq.storage import database_clock
from flask_solidq.values import ProcessKind

if t.TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric


#: The window of the ``*_last_hour`` gauges.
WINDOW = dt.timedelta(hours=1)
#: Budgets named in ``solidq_rate_limit_waiting_jobs``, those with the most waiting jobs.
MAX_BUDGETS = 20
#: Queues labelled by default (``SOLIDQ_METRICS_MAX_QUEUES``), those with the most jobs.
MAX_QUEUES = 100
#: The ``budget`` label of the jobs waiting on every other budget.
OTHER_BUDGETS = "(other)"
#: Process kinds listed even when none is registered (as 0), so an alert on "no worker
#: alive" needs no ``absent()``.
KINDS = ProcessKind.ALL

Reading = t.Callable[[], t.ContextManager[sa.Connection]]


class MetricsUnavailable(SolidQError):
    """The metrics need prometheus_client, which isn't installed."""

    def __init__(self) -> None:
        super().__init__(
            "The metrics need prometheus_client, which isn't installed: "
            'pip install "flask-solidq[metrics]".'
        )


@dataclasses.dataclass(frozen=True)
class Figures:
    """What a scrape reports, read in one transaction."""

    #: The largest queues (at most ``max_queues``); ``finished`` holds those of the last hour.
    queue_counts: list[queue_figures.QueueCounts]
    #: Failed executions created in the last hour (not yet retried or discarded), by queue.
    failed_last_hour: dict[str, int]
    #: Every other queue, summed; None when every queue is labelled.
    other: largest_queues.Rest | None
    #: (budget key, deferred jobs waiting): the most crowded first, then (other).
    waiting_by_budget: list[tuple[str, int]]
    #: Budgets with any job waiting.
    budgets_waiting: int
    coalescing: list[queue_figures.CoalesceSummary]
    #: (kind, "alive" or "silent") -> processes.
    processes: dict[tuple[str, str], int]


def read_figures(
    connection: sa.Connection,
    *,
    threshold: float,
    max_budgets: int = MAX_BUDGETS,
    max_queues: int = MAX_QUEUES,
) -> Figures:
    """Read every figure in ``connection``'s transaction, times measured on the database's
    clock.

    :param threshold: the seconds of silence after which a process counts as silent.
    :param max_budgets: the budgets named; the rest add up under :data:`OTHER_BUDGETS`.
    :param max_queues: the queues labelled; the rest add up under
        :data:`~flask_solidq.reads.largest_queues.OTHER`.
    """
    now = database_clock.now(connection)
    since = now - WINDOW
    ranking = largest_queues.largest(connection, since, max_queues)
    named = ranking.names
    finished = throughput.finished_by_queue(connection, since, named)
    per_queue = budgets.waiting_per_queue(connection)
    waiting = _per_budget(per_queue)
    deferred = _per_queue(per_queue)
    failed, failed_last_hour = _failed(connection, since, named)
    counts = queue_figures.queue_counts(
        connection,
        now,
        names=named,
        finished=finished,
        deferred=deferred,
        failed={name: size for name, size in failed.items() if name is not None},
    )
    other = None
    if ranking.every:
        counts = [queue for queue in counts if _holds_any(queue, int(queue.paused))]
    else:
        labelled = set(named)
        rest_deferred = sum(size for queue, size in deferred.items() if queue not in labelled)
        other = largest_queues.the_rest(
            connection,
            now,
            since,
            named,
            deferred=rest_deferred,
            failed=(failed.get(None, 0), failed_last_hour.get(None, 0)),
            named_finished=finished,
        )
    return Figures(
        queue_counts=counts,
        failed_last_hour={name: n for name, n in failed_last_hour.items() if name is not None},
        other=other if other is None or _holds_any(other.counts, other.paused) else None,
        waiting_by_budget=_top_budgets(waiting, max_budgets),
        budgets_waiting=len(waiting),
        coalescing=queue_figures.coalesce_summary(connection),
        processes=_processes_by_kind(connection, now, threshold),
    )


def _holds_any(counts: queue_figures.QueueCounts, paused: int) -> bool:
    """Whether a queue (or the queues not labelled) has anything to report: a job waiting,
    failed or finished in the last hour, or a pause. Otherwise it isn't listed."""
    sizes = (counts.ready, counts.scheduled, counts.claimed, counts.blocked, counts.failed)
    return any(sizes) or bool(counts.finished or paused)


def _failed(
    connection: sa.Connection, since: dt.datetime, names: list[str]
) -> tuple[dict[str | None, int], dict[str | None, int]]:
    """Failed executions by their job's queue (looked up by primary key, as
    :func:`~flask_solidq.reads.queue_figures.queue_counts` does), each of ``names`` apart and
    every other queue's together (under None): all of them, and those created from
    ``since``; one pass over the failed executions for both."""
    queue_name = largest_queues.job_queue(FAILED)
    named = sa.case((queue_name.in_(names), queue_name), else_=sa.null()).label("queue_name")
    recent = sa.func.sum(sa.case((FAILED.c.created_at >= since, 1), else_=0))
    statement = (
        sa.select(named, sa.func.count(), recent)
        .select_from(FAILED)
        .group_by(sa.literal_column("queue_name"))
    )
    rows = connection.execute(statement).all()
    return (
        {name: int(size) for name, size, _ in rows},
        {name: int(size) for name, _, size in rows if size},
    )


def _per_queue(waiting: list[tuple[str, budgets.Waiting]]) -> dict[str, int]:
    """Deferred jobs per queue."""
    counts: collections.Counter[str] = collections.Counter()
    for queue, entry in waiting:
        counts[queue] += entry.size
    return dict(counts)


def _per_budget(waiting: list[tuple[str, budgets.Waiting]]) -> list[budgets.Waiting]:
    """Deferred jobs per budget over every queue, as :func:`budgets.waiting` reads them."""
    merged: dict[str, budgets.Waiting] = {}
    for _queue, entry in waiting:
        seen = merged.get(entry.key)
        if seen is not None:
            entry = budgets.Waiting(
                entry.key, seen.size + entry.size, min(seen.next_check_at, entry.next_check_at)
            )
        merged[entry.key] = entry
    return [merged[key] for key in sorted(merged)]


def _top_budgets(waiting: list[budgets.Waiting], limit: int) -> list[tuple[str, int]]:
    ranked = sorted(waiting, key=lambda entry: (-entry.size, entry.key))
    named = [(entry.key, entry.size) for entry in ranked[:limit]]
    rest = sum(entry.size for entry in ranked[limit:])
    return named + [(OTHER_BUDGETS, rest)] if rest else named


def _processes_by_kind(
    connection: sa.Connection, now: dt.datetime, threshold: float
) -> dict[tuple[str, str], int]:
    counts: collections.Counter[tuple[str, str]] = collections.Counter(
        {(kind, state): 0 for kind in KINDS for state in ("alive", "silent")}
    )
    for row in process_rows(connection):
        silent = (now - row.last_heartbeat_at).total_seconds() > threshold
        counts[(row.kind, "silent" if silent else "alive")] += 1
    return dict(counts)


class QueueCollector:
    """A prometheus_client collector whose ``collect`` reads the figures when scraped."""

    def __init__(self, reading: Reading, *, threshold: float, max_queues: int) -> None:
        self.reading = reading
        self.threshold = threshold
        self.max_queues = max_queues

    def collect(self) -> list[Metric]:
        with self.reading() as connection:
            figures = read_figures(connection, threshold=self.threshold, max_queues=self.max_queues)
        return families(figures)


def exposition(
    reading: Reading,
    *,
    threshold: float,
    max_queues: int = MAX_QUEUES,
    accept: str | None = None,
) -> tuple[bytes, str]:
    """The figures, exposed in the format the ``Accept`` header asks for (Prometheus's text
    format unless it asks for OpenMetrics), and that format's content type.

    :param reading: opens a read-only transaction on the queue's database.
    :param max_queues: the queues labelled (``SOLIDQ_METRICS_MAX_QUEUES``).
    :raises MetricsUnavailable: prometheus_client isn't installed.
    """
    try:
        from prometheus_client import exposition as prometheus_exposition
        from prometheus_client.registry import CollectorRegistry
    except ImportError as error:
        raise MetricsUnavailable() from error
    registry = CollectorRegistry()
    registry.register(QueueCollector(reading, threshold=threshold, max_queues=max_queues))
    encode, content_type = prometheus_exposition.choose_encoder(accept or "")
    return encode(registry), content_type


def families(figures: Figures) -> list[Metric]:
    """The metric families of ``figures`` (README: Deploying, for what each means)."""
    from prometheus_client.core import GaugeMetricFamily as Gauge

    jobs = Gauge(
        "solidq_jobs",
        'Jobs by queue and state: the largest queues, the rest summed under queue="other".',
        labels=["queue", "state"],
    )
    latency = Gauge(
        "solidq_queue_latency_seconds",
        "How long the queue's oldest ready job has waited; 0 with none ready"
        ' (queue="other": the longest among the rest).',
        labels=["queue"],
    )
    paused = Gauge(
        "solidq_queue_paused",
        '1 while the queue is paused (queue="other": how many of the rest are).',
        labels=["queue"],
    )
    finished = Gauge(
        "solidq_jobs_finished_last_hour",
        "Jobs finished in the last hour that are still kept.",
        labels=["queue"],
    )
    failed = Gauge(
        "solidq_jobs_failed_last_hour",
        "Jobs that failed in the last hour, not yet retried or discarded.",
        labels=["queue"],
    )
    for queue in figures.queue_counts:
        for state, size in _states(queue):
            jobs.add_metric([queue.queue_name, state], size)
        latency.add_metric([queue.queue_name], queue.latency)
        paused.add_metric([queue.queue_name], 1 if queue.paused else 0)
        finished.add_metric([queue.queue_name], queue.finished)
        failed.add_metric([queue.queue_name], figures.failed_last_hour.get(queue.queue_name, 0))
    if figures.other is not None:
        rest, name = figures.other, largest_queues.OTHER
        for state, size in _states(rest.counts):
            jobs.add_metric([name, state], size)
        latency.add_metric([name], rest.counts.latency)
        paused.add_metric([name], rest.paused)
        finished.add_metric([name], rest.counts.finished)
        failed.add_metric([name], rest.failed_last_hour)
    return [
        jobs,
        latency,
        paused,
        finished,
        failed,
        *_budget_families(figures),
        *_coalesce_families(figures),
        _process_family(figures),
    ]


def _states(queue: queue_figures.QueueCounts) -> list[tuple[str, int]]:
    """Each state's jobs; every job is in one (deferred ones aren't in scheduled)."""
    return [
        ("ready", queue.ready),
        ("scheduled", queue.scheduled - queue.deferred),
        ("deferred", queue.deferred),
        ("claimed", queue.claimed),
        ("blocked", queue.blocked),
        ("failed", queue.failed),
    ]


def _budget_families(figures: Figures) -> list[Metric]:
    from prometheus_client.core import GaugeMetricFamily as Gauge

    waiting = Gauge(
        "solidq_rate_limit_waiting_jobs",
        f"Jobs a rate limit deferred that wait, by budget: the {MAX_BUDGETS} budgets with the"
        f" most, the rest under {OTHER_BUDGETS}.",
        labels=["budget"],
    )
    for key, size in figures.waiting_by_budget:
        waiting.add_metric([key], size)
    budgets_waiting = Gauge(
        "solidq_rate_limit_budgets_waiting",
        "Rate-limit budgets with deferred jobs waiting.",
        value=figures.budgets_waiting,
    )
    return [waiting, budgets_waiting]


def _coalesce_families(figures: Figures) -> list[Metric]:
    from prometheus_client.core import GaugeMetricFamily as Gauge

    open_keys = Gauge(
        "solidq_coalesce_open_keys",
        "Coalesce keys with an open job that new calls join, by job name.",
        labels=["job"],
    )
    calls = Gauge(
        "solidq_coalesce_waiting_calls",
        "Calls collected by coalescing jobs that haven't run yet, by job name.",
        labels=["job"],
    )
    for entry in figures.coalescing:
        open_keys.add_metric([entry.class_name], entry.open_keys)
        calls.add_metric([entry.class_name], entry.waiting_calls)
    return [open_keys, calls]


def _process_family(figures: Figures) -> Metric:
    from prometheus_client.core import GaugeMetricFamily as Gauge

    processes = Gauge(
        "solidq_processes",
        "Registered processes by kind: alive (heartbeat within SOLIDQ_PROCESS_ALIVE_THRESHOLD)"
        " or silent (past it: about to be pruned).",
        labels=["kind", "state"],
    )
    for (kind, state), size in sorted(figures.processes.items()):
        processes.add_metric([kind, state], size)
    return processes
