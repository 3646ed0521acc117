"""flask-solidq beside other Python job queues: PgQueuer, procrastinate, RQ and firm-queue.

    python bench/compare.py [--jobs N] [--backends sqlite,postgres,mysql,redis]
        [--peers flask-solidq,pgqueuer,procrastinate,rq,firm-queue] [--rounds R]

Needs the peers installed: ``pip install -e '.[bench]'``. A peer that doesn't import, or whose
server doesn't answer, is skipped with one line saying so.

The workload is the same for every queue: ``--jobs`` no-op jobs, each of which only appends its
index and ``time.time()`` to a file (``bench/peers/stamps.py``: one ``write`` to an ``O_APPEND``
descriptor per process). Every measurement starts from an empty store of the queue's own: a
scratch database with its schema (flask-solidq and firm-queue on SQLite, PostgreSQL and MariaDB;
PgQueuer and procrastinate on PostgreSQL), or a Redis database number flushed before use (RQ).

* **enqueue, single**: the wall time of N calls in the benchmark's process, one job per call,
  each committed (each queue's synchronous API: ``perform_later``, ``SyncQueries.enqueue``,
  ``defer``, ``Queue.enqueue``, ``job.enqueue``); the client's set-up isn't counted.
* **enqueue, bulk**: the same with each queue's bulk API, 1,000 jobs a call
  (``perform_all_later``, ``SyncQueries.enqueue`` with lists, ``batch_defer``,
  ``enqueue_many``; firm-queue has none).
* **drain**: the single-enqueued backlog is drained by one worker process, the bulk-enqueued one
  by two: the worker processes start, the backlog drains, they are stopped with their graceful
  signal. The rate is ``(N - 1) / (last start - first start)`` from the jobs' own stamps, so the
  processes' boot (imports, connecting, forking) isn't counted. Each queue runs with its
  defaults; flask-solidq also with 20 threads a process (the README's best measured setting for
  no-op jobs), on backlogs of their own. The worker commands are printed before the results.
  A drain still going ``--budget`` seconds (10) after its first job started is stopped there,
  and its rate is that of the jobs started by then (marked ``~``): the slowest queues here run
  20-50 jobs a second, so a backlog big enough to time the fast ones would take them minutes;
  ``--budget 0`` drains every backlog whole.

Every drain checks that each job started exactly once (a stamp per index; after a budget stop,
that none started twice); a drain that stalls (no new stamp for ``--stall`` seconds) or outlasts
``--timeout`` is stopped with a line saying so. Each configuration runs ``--rounds`` times,
interleaved (round 1: every queue, then round 2: every queue), and the table gives the range.
The ratio columns are the queue's mean rate divided by flask-solidq's on the same backend and
measurement (above 1: the other queue is faster); RQ, on Redis, is divided by flask-solidq on
PostgreSQL. The machine has 2 cores shared with the database servers: compare within one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import pathlib
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402
from bench import peers  # noqa: E402
from bench.peers import runner  # noqa: E402

BACKENDS = ("sqlite", "postgres", "mysql", "redis")
REFERENCE = "flask-solidq"
#: Backend whose flask-solidq figures the Redis queue's ratios are taken against.
REDIS_REFERENCE = "postgres"
DRIVERS = ("sqlalchemy", "psycopg", "pymysql", "asyncpg", "redis")


@dataclasses.dataclass(frozen=True)
class Unit:
    """One configuration: a queue on a backend with a worker layout."""

    backend: str
    server_url: str
    peer: peers.Peer
    layout: peers.Layout

    @property
    def label(self) -> str:
        processes = "1 process" if self.layout.processes == 1 else "2 processes"
        return f"{self.backend} {self.peer.name} {processes}, {self.layout.settings}"


@dataclasses.dataclass
class Sample:
    """What one run of a unit measured."""

    unit: Unit
    enqueue: tuple[str, float] | None = None
    drain: float | None = None
    check: str = "not run"
    problems: list[str] = dataclasses.field(default_factory=list)
    #: How many jobs started, when the drain budget stopped it first.
    partial: int | None = None


def main() -> None:
    """Run every configuration ``--rounds`` times, interleaved, then print the table."""
    options = _options()
    loaded = load_peers(options.peers)
    servers = reachable_backends(options.backends, loaded, options.redis_url)
    units = plan(loaded, servers)
    if not units:
        raise SystemExit("Nothing to measure.")
    print("\n".join(common.machine_lines([server for server in servers if server[0] != "redis"])))
    print("\n".join(version_lines(loaded, servers)))
    print("\n".join(command_lines(units)), flush=True)

    samples = []
    started = time.monotonic()
    for round_number in range(1, options.rounds + 1):
        for unit in units:
            sample = run(unit, options)
            samples.append(sample)
            print(f"# round {round_number}: {progress_line(sample)}", flush=True)
    print(f"# {len(samples)} runs in {time.monotonic() - started:.0f} s")
    print()
    print(report(samples, options.jobs, options.rounds, options.budget))
    print()
    print("\n".join(problem_lines(samples)))


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per backlog")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated")
    parser.add_argument("--peers", default=",".join(peers.MODULES), help="comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each configuration")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a drain may take")
    parser.add_argument(
        "--budget",
        type=float,
        default=10.0,
        help="seconds after a drain's first job start at which it is stopped and its rate taken"
        " from the jobs started so far (0: always drain the whole backlog)",
    )
    parser.add_argument(
        "--stall", type=float, default=30.0, help="seconds without a new job start that end a drain"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379", help="RQ's server")
    options = parser.parse_args()
    options.backends = _names(options.backends, BACKENDS, "backends")
    options.peers = _names(options.peers, tuple(peers.MODULES), "peers")
    if options.jobs < 2 or options.rounds < 1:
        parser.error("--jobs must be at least 2 and --rounds at least 1")
    return options


def _names(value: str, known: tuple[str, ...], what: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise SystemExit(f"Unknown {what} {unknown}; choose from {','.join(known)}.")
    return [name for name in known if name in names]


def load_peers(names: list[str]) -> list[peers.Peer]:
    """The chosen peers that import; one line for each that doesn't."""
    loaded = []
    for name in names:
        try:
            module = importlib.import_module(f"bench.peers.{peers.MODULES[name]}")
        except ImportError as exc:
            print(f"# {name}: skipped, not importable ({exc}); pip install -e '.[bench]'")
            continue
        loaded.append(t.cast(peers.Peer, module.PEER))
    return loaded


def reachable_backends(
    names: list[str], loaded: list[peers.Peer], redis_url: str
) -> list[tuple[str, str]]:
    """(backend, server URL) of the chosen backends that answer; one line for each that doesn't,
    and for each peer left with nothing to run on."""
    databases = [name for name in names if name != "redis"]
    servers = common.chosen_backends(",".join(databases)) if databases else []
    if "redis" in names and any("redis" in peer.backends for peer in loaded):
        from bench.peers import rq_peer

        failure = rq_peer.reachable(redis_url)
        if failure:
            print(f"# redis: not measured ({failure})")
        else:
            servers.append(("redis", redis_url))
    answering = {name for name, _ in servers}
    for peer in loaded:
        if not answering & set(peer.backends):
            wanted = ",".join(peer.backends)
            print(f"# {peer.name}: skipped, none of its backends ({wanted}) chosen and answering")
    return servers


def plan(loaded: list[peers.Peer], servers: list[tuple[str, str]]) -> list[Unit]:
    """Every (backend, peer, layout) to run, in the order of one round."""
    return [
        Unit(backend, server_url, peer, layout)
        for backend, server_url in servers
        for peer in loaded
        if backend in peer.backends
        for layout in peer.layouts()
    ]


def version_lines(loaded: list[peers.Peer], servers: list[tuple[str, str]]) -> list[str]:
    """The versions of the queues and drivers, and of the Redis server."""
    lines = [f"# {peer.name} {_version(peer.distribution)}" for peer in loaded]
    drivers = ", ".join(f"{name} {_version(name)}" for name in DRIVERS)
    lines.append(f"# drivers: {drivers}")
    for name, url in servers:
        if name == "redis":
            from redis import Redis

            with Redis.from_url(url) as connection:
                info = connection.info("server")
            lines.append(f"# redis: {info.get('redis_version')} at {url}")
    return lines


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def command_lines(units: list[Unit]) -> list[str]:
    """The worker command of each queue's layouts (on the first backend it runs on)."""
    lines = ["# worker commands (one line per OS process started; URLs are scratch ones):"]
    shown = set()
    for unit in units:
        key = (unit.peer.name, unit.layout)
        if key in shown:
            continue
        shown.add(key)
        scratch = peers.Scratch(unit.backend, "<url>", lambda: None)
        commands = unit.peer.commands(scratch, unit.layout)
        times = f" (x{len(commands)})" if len(commands) > 1 else ""
        lines.append(f"#   {unit.peer.name}, {unit.layout.settings}: {_short(commands[0])}{times}")
    return lines


def _short(command: list[str]) -> str:
    """A command line without the venv's path, as a reader would type it."""
    first = pathlib.Path(command[0]).name
    return shlex.join([first, *command[1:]])


def run(unit: Unit, options: argparse.Namespace) -> Sample:
    """Enqueue a backlog into a fresh store and drain it; never raises."""
    sample = Sample(unit)
    try:
        scratch = unit.peer.create(unit.backend, unit.server_url)
    except Exception as exc:  # noqa: BLE001 - reported, and the next unit runs
        sample.problems.append(f"set-up failed: {exc.__class__.__name__}: {exc}")
        return sample
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-compare-"))
    try:
        bulk = unit.layout.enqueue == "bulk" and unit.peer.has_bulk
        seconds = unit.peer.enqueue(scratch, options.jobs, bulk)
        kind = "bulk" if bulk else "single"
        if kind == unit.layout.enqueue and not unit.layout.best:
            sample.enqueue = (kind, options.jobs / seconds)
        drained = runner.drain(
            unit.peer,
            scratch,
            unit.layout,
            options.jobs,
            workdir,
            timeout=options.timeout,
            stall=options.stall,
            budget=options.budget,
        )
        sample.drain, sample.check, sample.problems = drained.rate, drained.check, drained.problems
        sample.partial = drained.started if drained.partial else None
    except Exception as exc:  # noqa: BLE001 - reported, and the next unit runs
        sample.problems.append(f"failed: {exc.__class__.__name__}: {exc}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        try:
            scratch.drop()
        except Exception as exc:  # noqa: BLE001
            sample.problems.append(f"dropping the scratch store failed: {exc!r}")
    return sample


def progress_line(sample: Sample) -> str:
    parts = [sample.unit.label]
    if sample.enqueue:
        parts.append(f"enqueue {sample.enqueue[0]} {sample.enqueue[1]:,.0f}/s")
    parts.append(f"drain {_rate(sample.drain)}/s")
    if sample.partial is not None:
        parts.append(f"budget reached after {sample.partial:,} jobs")
    parts.append(f"check {sample.check}")
    return "; ".join(parts) + ("; PROBLEMS below" if sample.problems else "")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


# The report.

MEASUREMENTS = (
    "enqueue, single",
    f"enqueue, bulk ({peers.BATCH:,}/call)",
    "drain, 1 process",
    "drain, 2 processes",
)


@dataclasses.dataclass
class Row:
    """One line of the table: a queue's rates for one measurement on one backend."""

    backend: str
    measurement: str
    peer: str
    settings: str
    best: bool
    rates: list[float] = dataclasses.field(default_factory=list)
    unchecked: bool = False
    partial: bool = False
    note: str = ""


def report(samples: list[Sample], jobs: int, rounds: int, budget: float) -> str:
    """The table: jobs/s ranges and the ratios against flask-solidq."""
    rows = collect(samples)
    header = [
        "backend",
        "measurement",
        "queue",
        "settings",
        f"jobs/s ({rounds} round{'s' if rounds > 1 else ''})",
        "÷ solidq",
        "÷ solidq best",
    ]
    lines = []
    for row in rows:
        reference = _reference(rows, row, best=False)
        best = _reference(rows, row, best=True)
        lines.append(
            [
                row.backend,
                row.measurement,
                row.peer,
                row.settings,
                row.note or _range(row.rates) + _marks(row),
                _ratio(row, reference),
                _ratio(row, best) if row.measurement.startswith("drain") else "",
            ]
        )
    title = "\n".join(
        [
            f"Jobs/s, {jobs:,} no-op jobs a backlog, min - max of {rounds} round(s).",
            "÷ solidq: this queue's mean / flask-solidq's mean with its defaults, same backend and"
            f" measurement (RQ, on Redis: flask-solidq on {REDIS_REFERENCE}); above 1 = faster"
            " than flask-solidq. ÷ solidq best: the same against flask-solidq with 20 threads.",
            f"~ = a drain stopped by the {budget:g} s budget (rate of the jobs started by then);"
            " ! = an exactly-once check failed (see below).",
        ]
    )
    return title + "\n" + _table(header, lines)


def collect(samples: list[Sample]) -> list[Row]:
    """The samples grouped into rows, in table order: backend, measurement, queue."""
    rows: dict[tuple[str, str, str, str], Row] = {}
    for sample in samples:
        unit = sample.unit
        if not unit.layout.best:
            measurement = MEASUREMENTS[0 if unit.layout.enqueue == "single" else 1]
            row = _row(rows, unit, measurement, best=False)
            if unit.layout.enqueue == "bulk" and not unit.peer.has_bulk:
                row.note = "no bulk API"
            elif sample.enqueue is not None:
                row.rates.append(sample.enqueue[1])
        measurement = MEASUREMENTS[2 if unit.layout.processes == 1 else 3]
        row = _row(rows, unit, measurement, best=unit.layout.best)
        if sample.drain is not None:
            row.rates.append(sample.drain)
        row.unchecked |= sample.check != "ok"
        row.partial |= sample.partial is not None
    order = {name: index for index, name in enumerate(peers.MODULES)}
    return sorted(
        rows.values(),
        key=lambda row: (
            BACKENDS.index(row.backend),
            MEASUREMENTS.index(row.measurement),
            order[row.peer],
            row.best,
        ),
    )


def _row(
    rows: dict[tuple[str, str, str, str], Row], unit: Unit, measurement: str, best: bool
) -> Row:
    settings = unit.layout.settings if measurement.startswith("drain") else ""
    key = (unit.backend, measurement, unit.peer.name, settings)
    if key not in rows:
        rows[key] = Row(unit.backend, measurement, unit.peer.name, settings, best)
    return rows[key]


def _reference(rows: list[Row], row: Row, *, best: bool) -> Row | None:
    """flask-solidq's row to divide ``row`` by."""
    backend = REDIS_REFERENCE if row.backend == "redis" else row.backend
    for other in rows:
        if (
            other.peer == REFERENCE
            and other.backend == backend
            and other.measurement == row.measurement
            and other.best == best
        ):
            return other
    return None


def _ratio(row: Row, reference: Row | None) -> str:
    if reference is None or not row.rates or not reference.rates:
        return "-"
    return f"{statistics.fmean(row.rates) / statistics.fmean(reference.rates):.2f}"


def _marks(row: Row) -> str:
    return (" ~" if row.partial else "") + (" !" if row.unchecked else "")


def _range(rates: list[float]) -> str:
    if not rates:
        return "-"
    low, high = min(rates), max(rates)
    return f"{low:,.0f}" if len(rates) == 1 else f"{low:,.0f} - {high:,.0f}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    """common.table, with a blank line between backends."""
    text = common.table(headers, rows).splitlines()
    lines = text[:2]
    previous = None
    for line, row in zip(text[2:], rows, strict=True):
        if previous is not None and row[0] != previous:
            lines.append("")
        lines.append(line)
        previous = row[0]
    return "\n".join(lines)


def problem_lines(samples: list[Sample]) -> list[str]:
    """Each run whose check failed or that reported a problem, with its lines."""
    lines = []
    for number, sample in enumerate(samples):
        if sample.check == "ok" and not sample.problems:
            continue
        lines.append(f"WARNING run {number + 1} ({sample.unit.label}): check {sample.check}")
        lines += [f"  {problem}" for problem in sample.problems]
    return lines or ["Every drain: each job started exactly once."]


if __name__ == "__main__":
    main()
