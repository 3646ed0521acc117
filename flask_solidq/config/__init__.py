"""The ``SOLIDQ_*`` configuration keys: defaults, validation, and the parsed :class:`Settings`.

Each key is read once, in ``init_app``, with ``app.config.setdefault`` so its default shows in
``app.config``. A wrong value raises :class:`ValueError` or :class:`TypeError` naming the key,
what it got and what it takes. Durations become float seconds.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import typing as t

from flask_solidq import argument_filter
from flask_solidq import identifiers
from flask_solidq.config import keys as read
from flask_solidq.config.recurring import RecurringSettings as RecurringSettings
from flask_solidq.config.recurring import parse_recurring
from flask_solidq.timing import to_seconds


class Adapter(str, enum.Enum):
    """``SOLIDQ_ADAPTER``: where ``perform_later`` sends a job
    (:mod:`flask_solidq.extension.adapters`)."""

    #: The database queue.
    SOLIDQ = "solidq"
    #: Performed at once, in the caller's thread.
    INLINE = "inline"
    #: Recorded only, for :mod:`flask_solidq.testing`.
    TEST = "test"


class OnWorkerDeath(str, enum.Enum):
    """``SOLIDQ_ON_WORKER_DEATH``: what becomes of the jobs a dead worker had claimed."""

    #: Kept as failed executions naming the process (Solid Queue's behaviour).
    FAIL = "fail"
    #: Put back to ready, to run again.
    RELEASE = "release"


#: A worker's default ``prefetch``: the most jobs it claims beyond its idle threads, queued
#: for the next thread that frees; fewer for longer jobs (see
#: :mod:`flask_solidq.processes.worker`).
DEFAULT_PREFETCH = 100

DEFAULT_WORKER: dict[str, object] = {
    "queues": "*",
    "threads": 3,
    "processes": 1,
    "polling_interval": 0.1,
    "prefetch": DEFAULT_PREFETCH,
}
DEFAULT_DISPATCHER: dict[str, object] = {
    "polling_interval": 1,
    "batch_size": 500,
    "concurrency_maintenance": True,
    "concurrency_maintenance_interval": 600,
}

DEFAULTS: dict[str, object] = {
    "SOLIDQ_BIND": None,
    "SOLIDQ_ADAPTER": "solidq",
    "SOLIDQ_WORKERS": [dict(DEFAULT_WORKER)],
    "SOLIDQ_DISPATCHERS": [dict(DEFAULT_DISPATCHER)],
    "SOLIDQ_RECURRING": {},
    "SOLIDQ_PROCESS_HEARTBEAT_INTERVAL": 60,
    "SOLIDQ_PROCESS_ALIVE_THRESHOLD": 300,
    "SOLIDQ_SHUTDOWN_TIMEOUT": 5,
    "SOLIDQ_ON_WORKER_DEATH": "fail",
    "SOLIDQ_USE_SKIP_LOCKED": True,
    "SOLIDQ_PRESERVE_FINISHED_JOBS": True,
    "SOLIDQ_CLEAR_FINISHED_JOBS_AFTER": 86400,
    "SOLIDQ_DASHBOARD": True,
    "SOLIDQ_DASHBOARD_URL_PREFIX": "/solidq",
    "SOLIDQ_DASHBOARD_BASIC_AUTH": None,
    "SOLIDQ_ENQUEUE_IN_APP_TRANSACTION": True,
    "SOLIDQ_DATABASE_CONNECT_TIMEOUT": 10,
    "SOLIDQ_DATABASE_DEAD_CONNECTION_TIMEOUT": 30,
    "SOLIDQ_DATABASE_STATEMENT_TIMEOUT": 30,
    "SOLIDQ_DATABASE_PRE_PING": False,
    "SOLIDQ_DATABASE_POOLER": None,
    "SOLIDQ_DATABASE_LISTEN_URL": None,
    "SOLIDQ_ON_THREAD_ERROR": None,
    "SOLIDQ_CHECK_ARGUMENTS": True,
    "SOLIDQ_MAX_RESUMPTIONS": 100,
    "SOLIDQ_STEP_SAVE_INTERVAL": 5,
    "SOLIDQ_FILTER_ARGUMENTS": list(argument_filter.DEFAULT_NAMES),
    "SOLIDQ_METRICS_MAX_QUEUES": 100,
    "SOLIDQ_STATS_RETENTION": 604800,
    "SOLIDQ_STATS_FLUSH_INTERVAL": 5,
}


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """One entry of ``SOLIDQ_WORKERS``."""

    queues: tuple[str, ...]
    threads: int
    processes: int
    polling_interval: float
    #: Jobs claimed ahead of the idle threads, queued for the next thread that frees; 0
    #: claims for idle threads only. Never rate-limited jobs (those start at once).
    prefetch: int = DEFAULT_PREFETCH


@dataclasses.dataclass(frozen=True)
class DispatcherSettings:
    """One entry of ``SOLIDQ_DISPATCHERS``."""

    polling_interval: float
    batch_size: int
    concurrency_maintenance: bool
    concurrency_maintenance_interval: float


@dataclasses.dataclass(frozen=True)
class Settings:
    """The parsed ``SOLIDQ_*`` keys of one app; durations in seconds."""

    bind: str | None
    adapter: Adapter
    workers: tuple[WorkerSettings, ...]
    dispatchers: tuple[DispatcherSettings, ...]
    recurring: tuple[RecurringSettings, ...]
    process_heartbeat_interval: float
    process_alive_threshold: float
    shutdown_timeout: float
    on_worker_death: OnWorkerDeath
    use_skip_locked: bool
    preserve_finished_jobs: bool
    clear_finished_jobs_after: float
    dashboard: bool
    dashboard_url_prefix: str
    dashboard_basic_auth: tuple[str, str] | None
    #: Whether an enqueue joins the app session's transaction when that has written on the
    #: queue's database (see :mod:`flask_solidq.storage.app_transaction`).
    enqueue_in_app_transaction: bool
    #: ``SOLIDQ_DATABASE_CONNECT_TIMEOUT``: seconds a new connection of the queue's engines
    #: may take to open before it fails (PostgreSQL's ``connect_timeout``, at least 2 s there;
    #: PyMySQL's ``connect_timeout``); None leaves the driver's default (wait forever on
    #: PostgreSQL). Default 10 s: a server that hasn't answered by then is down or blackholed.
    database_connect_timeout: float | None
    #: ``SOLIDQ_DATABASE_DEAD_CONNECTION_TIMEOUT``: seconds after which a connection whose
    #: network path went silent (dropped without FIN or RST) is given up, instead of after
    #: the kernel's two hours. PostgreSQL: TCP keepalives (first probe after a third of it,
    #: then 4 probes a sixth of it apart) and ``tcp_user_timeout`` (unacknowledged data).
    #: MySQL/MariaDB (PyMySQL exposes no keepalives): ``read_timeout`` and ``write_timeout``
    #: of the statement timeout plus this, so no reply a statement may legitimately take is
    #: cut short. None leaves the operating system's settings. Default 30 s.
    database_dead_connection_timeout: float | None
    #: ``SOLIDQ_DATABASE_STATEMENT_TIMEOUT``: the longest one statement of the queue's own
    #: (enqueue, claim, dispatch, finish, maintenance, heartbeats, ``flask solidq status``)
    #: may run before the server cancels it: PostgreSQL's ``statement_timeout``, MariaDB's
    #: ``max_statement_time``, MySQL's ``max_execution_time`` (SELECTs only there). It is set
    #: on the queue's engines only, never on the app's: a job's own work (``db.session``) is
    #: not limited. None turns it off. Default 30 s: queue statements take milliseconds; one
    #: that runs for 30 s waits on a lock or a sick server, and holding it longer helps no one.
    database_statement_timeout: float | None
    #: ``SOLIDQ_DATABASE_PRE_PING``: test a pooled connection before handing it out (SQLAlchemy's
    #: ``pool_pre_ping``), so a connection the server or the network closed while it sat in
    #: the pool is replaced instead of failing the next statement. Default False: it costs a
    #: round trip on every checkout, the hot path's claims and finishes included (see
    #: docs/performance.md, "Figures behind the code"), and the equivalent comes free:
    #: SQLAlchemy invalidates the whole pool on the first disconnect error it sees, the
    #: processes retry their next poll on fresh connections, and the keepalives and timeouts
    #: above notice a dead path. A web process that must not fail one enqueue after a database
    #: restart can turn it on.
    database_pre_ping: bool
    #: ``SOLIDQ_DATABASE_POOLER``: ``"pgbouncer"`` when the queue reaches PostgreSQL through
    #: PgBouncer (most hosted PostgreSQL puts it in front), in transaction or session pooling.
    #: Transaction pooling hands each transaction any server connection, so nothing may live
    #: on a session: the statement timeout and the claims' ``synchronous_commit=off`` are set
    #: with ``SET LOCAL`` in each of the queue's transactions (in the round trip of its
    #: ``BEGIN``, or in the query string of a single statement) instead of as startup options,
    #: which PgBouncer refuses; psycopg prepares no statement on the server (a statement
    #: prepared on one server connection doesn't exist on the next); and ``LISTEN`` needs
    #: ``SOLIDQ_DATABASE_LISTEN_URL``. Default None: connected directly. Without it, PgBouncer's
    #: refusal ("unsupported startup parameter", "prepared statement ... does not exist") is
    #: logged as itself, naming this key, never as an outage.
    database_pooler: str | None
    #: ``SOLIDQ_DATABASE_LISTEN_URL``: with ``SOLIDQ_DATABASE_POOLER``, a URL (string or
    #: ``sqlalchemy.URL``) that reaches the same PostgreSQL database directly, past the pooler,
    #: for the one ``LISTEN`` connection of each worker and dispatcher: the notifications that
    #: wake them at once when jobs become ready or are deferred to a time. A session-pooling
    #: PgBouncer keeps sessions, so its own URL does too. Without it (default None) they poll:
    #: a dispatcher at least every 0.2 s, the processes of one machine still wake each other
    #: through its sockets, and ``flask solidq work`` logs one WARNING at start saying so.
    database_listen_url: str | None
    #: ``SOLIDQ_ON_THREAD_ERROR``: called with each exception of the queue's own threads (a
    #: worker's claim, the finisher storing outcomes, heartbeats, a dispatcher's or the
    #: scheduler's poll, a supervisor's pruning), e.g. ``sentry_sdk.capture_exception``, as
    #: Solid Queue's ``on_thread_error``. The thread carries on either way; a hook that raises
    #: is logged. A database outage calls it for its first error only. Jobs' own errors don't
    #: come here: they are failures, sent by ``signals.fail``. Default None.
    on_thread_error: t.Callable[[BaseException], object] | None
    #: ``SOLIDQ_CHECK_ARGUMENTS``: bind each enqueued job's arguments to its signature (the
    #: function of ``@solidq.job``, a class's ``perform``) and raise ``TypeError`` at the
    #: enqueue, so a wrong call fails in the caller instead of later in a worker. Default True;
    #: turn it off for jobs whose signature is built at run time and can't be read ahead.
    check_arguments: bool
    #: ``SOLIDQ_MAX_RESUMPTIONS``: how many times a job with steps may resume from saved
    #: progress before its next interruption fails it (``ResumptionLimitReached``), unless its
    #: definition says ``max_resumptions=``. None: no limit. Default 100: a job interrupted
    #: that often never gets through, and a failure says so where a loop would not.
    max_resumptions: int | None = 100
    #: ``SOLIDQ_STEP_SAVE_INTERVAL``: while a job with steps runs in a worker, its progress is
    #: written when a step finishes and at an ``advance`` once this many seconds passed since
    #: the last write (0: every ``advance``), so a worker killed outright loses at most that
    #: much. None: only with the job's outcome (interrupted, retried, failed). Default 5 s: a
    #: write per job every few seconds costs nothing next to the work between them.
    step_save_interval: float | None = 5.0
    #: ``SOLIDQ_FILTER_ARGUMENTS``, compiled: keyword arguments and dict keys in arguments
    #: containing one of its words (case-insensitive) are shown as ``[FILTERED]`` by the
    #: dashboard, the CLI and the logs (:mod:`flask_solidq.argument_filter`); an empty list
    #: filters nothing. The job still receives the real values.
    filter_arguments: argument_filter.ArgumentFilter = argument_filter.DEFAULT
    #: ``SOLIDQ_METRICS_MAX_QUEUES``: ``/metrics`` (and ``flask solidq metrics``) label at
    #: most this many queues, those with the most jobs, and sum the rest under
    #: ``queue="other"``: each labelled queue is a time series in Prometheus, so an app with a
    #: queue per tenant would otherwise grow them without bound. Default 100.
    metrics_max_queues: int = 100
    #: ``SOLIDQ_STATS_RETENTION``: seconds of per-minute job statistics kept
    #: (``solidq_job_stats``: runs, failures, durations, latency) for the dashboard's stats
    #: and ``flask solidq stats``; the supervisors delete older minutes. Default a week.
    stats_retention: float = 604800.0
    #: ``SOLIDQ_STATS_FLUSH_INTERVAL``: how often, in seconds, a worker adds the runs it
    #: counted to ``solidq_job_stats`` (and once more as it stops): a worker killed loses at
    #: most this long's counts. Default 5.
    stats_flush_interval: float = 5.0


def load_settings(config: t.MutableMapping[str, object]) -> Settings:
    """Fill in the defaults of every ``SOLIDQ_*`` key in ``config`` and parse them.

    :raises ValueError, TypeError: a key holds a value it can't take; the message names it.
    """
    for key, default in DEFAULTS.items():
        # A copy: the defaults' lists and dicts must not be shared between apps.
        config.setdefault(key, copy.deepcopy(default))

    return Settings(
        bind=read.optional_str(config, "SOLIDQ_BIND"),
        adapter=read.choice(config, "SOLIDQ_ADAPTER", Adapter),
        workers=tuple(
            worker_settings(entry, f"SOLIDQ_WORKERS[{index}]")
            for index, entry in enumerate(read.list_of_dicts(config, "SOLIDQ_WORKERS"))
        ),
        dispatchers=tuple(
            _dispatcher(entry, f"SOLIDQ_DISPATCHERS[{index}]")
            for index, entry in enumerate(read.list_of_dicts(config, "SOLIDQ_DISPATCHERS"))
        ),
        recurring=parse_recurring(config["SOLIDQ_RECURRING"]),
        process_heartbeat_interval=read.seconds(config, "SOLIDQ_PROCESS_HEARTBEAT_INTERVAL"),
        process_alive_threshold=read.seconds(config, "SOLIDQ_PROCESS_ALIVE_THRESHOLD"),
        shutdown_timeout=read.seconds(config, "SOLIDQ_SHUTDOWN_TIMEOUT", allow_zero=True),
        on_worker_death=read.choice(config, "SOLIDQ_ON_WORKER_DEATH", OnWorkerDeath),
        use_skip_locked=read.boolean(config, "SOLIDQ_USE_SKIP_LOCKED"),
        preserve_finished_jobs=read.boolean(config, "SOLIDQ_PRESERVE_FINISHED_JOBS"),
        clear_finished_jobs_after=read.seconds(config, "SOLIDQ_CLEAR_FINISHED_JOBS_AFTER"),
        dashboard=read.boolean(config, "SOLIDQ_DASHBOARD"),
        dashboard_url_prefix=read.url_prefix(config, "SOLIDQ_DASHBOARD_URL_PREFIX"),
        dashboard_basic_auth=read.basic_auth(config, "SOLIDQ_DASHBOARD_BASIC_AUTH"),
        enqueue_in_app_transaction=read.boolean(config, "SOLIDQ_ENQUEUE_IN_APP_TRANSACTION"),
        database_connect_timeout=read.optional_seconds(config, "SOLIDQ_DATABASE_CONNECT_TIMEOUT"),
        database_dead_connection_timeout=read.optional_seconds(
            config, "SOLIDQ_DATABASE_DEAD_CONNECTION_TIMEOUT"
        ),
        database_statement_timeout=read.optional_seconds(
            config, "SOLIDQ_DATABASE_STATEMENT_TIMEOUT"
        ),
        database_pre_ping=read.boolean(config, "SOLIDQ_DATABASE_PRE_PING"),
        database_pooler=read.pooler(config, "SOLIDQ_DATABASE_POOLER"),
        database_listen_url=read.listen_url(config, "SOLIDQ_DATABASE_LISTEN_URL"),
        on_thread_error=read.optional_callable(config, "SOLIDQ_ON_THREAD_ERROR"),
        check_arguments=read.boolean(config, "SOLIDQ_CHECK_ARGUMENTS"),
        max_resumptions=_optional_count(config, "SOLIDQ_MAX_RESUMPTIONS"),
        step_save_interval=_optional_interval(config, "SOLIDQ_STEP_SAVE_INTERVAL"),
        filter_arguments=argument_filter.ArgumentFilter.of(
            read.words(config, "SOLIDQ_FILTER_ARGUMENTS")
        ),
        metrics_max_queues=read.positive_int(
            config["SOLIDQ_METRICS_MAX_QUEUES"], "SOLIDQ_METRICS_MAX_QUEUES"
        ),
        stats_retention=read.seconds(config, "SOLIDQ_STATS_RETENTION"),
        stats_flush_interval=read.seconds(config, "SOLIDQ_STATS_FLUSH_INTERVAL"),
    )


def _optional_interval(config: t.Mapping[str, object], key: str) -> float | None:
    """Seconds, 0 included, or None for "never"."""
    value = config[key]
    return None if value is None else read.seconds(config, key, allow_zero=True)


def _optional_count(config: t.Mapping[str, object], key: str) -> int | None:
    """An int of 0 or more, or None for "no limit"."""
    value = config[key]
    return None if value is None else read.non_negative_int(value, key)


def parse_queues(value: object, *, name: str) -> tuple[str, ...]:
    """Parse a queue list: a list of names or one comma-separated string; ``"*"`` is every
    queue and ``"prefix*"`` every queue starting with ``prefix``."""
    if isinstance(value, str):
        names = [part.strip() for part in value.split(",")]
    elif isinstance(value, (list, tuple)) and all(isinstance(part, str) for part in value):
        names = [part.strip() for part in value]
    else:
        raise TypeError(
            f"{name} must be a list of queue names or a comma-separated string, not {value!r}."
        )
    names = [part for part in names if part]
    if not names:
        raise ValueError(f'{name} names no queue; use "*" for every queue.')
    for part in names:
        identifiers.check_name(part, f"queue {part[:40]!r} in {name}")
    return tuple(dict.fromkeys(names))


def worker_settings(entry: dict[str, object], name: str = "SOLIDQ_WORKERS[0]") -> WorkerSettings:
    """Parse one worker entry; missing keys take the defaults."""
    values = read.known_keys({**DEFAULT_WORKER, **entry}, DEFAULT_WORKER, name)
    return WorkerSettings(
        queues=parse_queues(values["queues"], name=f"{name}['queues']"),
        threads=read.positive_int(values["threads"], f"{name}['threads']"),
        processes=read.positive_int(values["processes"], f"{name}['processes']"),
        polling_interval=to_seconds(values["polling_interval"], name=f"{name}['polling_interval']"),
        prefetch=read.non_negative_int(values["prefetch"], f"{name}['prefetch']"),
    )


def _dispatcher(entry: dict[str, object], name: str) -> DispatcherSettings:
    values = read.known_keys({**DEFAULT_DISPATCHER, **entry}, DEFAULT_DISPATCHER, name)
    maintenance = values["concurrency_maintenance"]
    if not isinstance(maintenance, bool):
        raise TypeError(f"{name}['concurrency_maintenance'] must be True or False.")
    return DispatcherSettings(
        polling_interval=to_seconds(values["polling_interval"], name=f"{name}['polling_interval']"),
        batch_size=read.positive_int(values["batch_size"], f"{name}['batch_size']"),
        concurrency_maintenance=maintenance,
        concurrency_maintenance_interval=to_seconds(
            values["concurrency_maintenance_interval"],
            name=f"{name}['concurrency_maintenance_interval']",
        ),
    )
