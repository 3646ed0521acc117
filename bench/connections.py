"""How many database connections each process of ``flask solidq work`` holds, counted on the
server (``pg_stat_activity``; MariaDB's ``information_schema.PROCESSLIST``).

    python bench/connections.py [--backends postgres,mysql] [--layouts 2x3,1x10]
                                [--jobs 5000]

For each backend and each layout PxT (a scratch database each, dropped at the end), one
``flask --app bench.app:create_app solidq work --processes P --threads T`` runs with its
defaults otherwise (fork mode: a supervisor, P workers, a dispatcher, and a scheduler for the
one recurring task it is given). The
server's connections to the scratch database are mapped to the process holding them by their
client port (``ss -tnp``, Linux) and the process to its kind by ``solidq_processes.pid``. Three
phases, each the largest count seen per process over its samples (every 0.2 s):

* ``idle``: 3 s after every process registered, nothing to do;
* ``no-op drain``: while ``--jobs`` no-op jobs drain (the job threads touch no database);
* ``writing jobs``: while ``--jobs`` ``bench.record_start`` jobs drain, each of which writes a
  row through the queue's engine from its job thread, as a job that enqueues another does.

Run as root (or as the user running the worker) so ``ss`` can name the processes.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from bench import app as bench_app  # noqa: E402
from bench import common  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402

PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
SAMPLE_EVERY = 0.2
#: One recurring task, so that ``flask solidq work`` starts its scheduler too.
RECURRING = {
    "SOLIDQ_RECURRING": {
        "tick": {"job": "bench.common:noop", "args": [0], "schedule": "every hour"}
    }
}
_SS_LINE = re.compile(r"\S+:(\d+)\s+\S+:(\d+)\s+users:\(\(\"[^\"]*\",pid=(\d+)")


def server_ports(engine: sa.Engine, database: str) -> list[int]:
    """The client ports of the server's connections to ``database`` (the asking one aside)."""
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            rows = connection.exec_driver_sql(
                "SELECT client_port FROM pg_stat_activity"
                " WHERE datname = %(db)s AND pid <> pg_backend_pid()",
                {"db": database},
            ).all()
            return [int(port) for (port,) in rows if port is not None and port > 0]
        rows = connection.exec_driver_sql(
            "SELECT host FROM information_schema.PROCESSLIST"
            " WHERE db = %(db)s AND id <> CONNECTION_ID()",
            {"db": database},
        ).all()
        return [int(host.rsplit(":", 1)[1]) for (host,) in rows if ":" in str(host)]


def port_owners(server_port: int) -> dict[int, int]:
    """Local port -> pid of every established TCP connection to ``server_port`` (``ss``)."""
    output = subprocess.run(
        ["ss", "-Htnp", "state", "established", f"( dport = :{server_port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    owners = {}
    for line in output.splitlines():
        match = _SS_LINE.search(line)
        if match:
            owners[int(match.group(1))] = int(match.group(3))
    return owners


def kinds(engine: sa.Engine, supervisor_pid: int) -> dict[int, str]:
    """pid -> process kind, from the registry (the supervisor is known by its pid)."""
    with solidq_db.read(engine) as connection:
        rows = connection.execute(sa.select(PROCESSES.c.pid, PROCESSES.c.kind)).all()
    found = {int(pid): str(kind) for pid, kind in rows}
    found.setdefault(supervisor_pid, "Supervisor")
    return found


def sample(
    engine: sa.Engine, database: str, server_port: int, supervisor_pid: int
) -> dict[int, int]:
    """pid -> connections it holds to the scratch database right now."""
    owners = port_owners(server_port)
    counts: collections.Counter[int] = collections.Counter()
    for port in server_ports(engine, database):
        counts[owners.get(port, -1)] += 1
    counts.pop(os.getpid(), None)  # the benchmark's own connections
    return dict(counts)


def watch(
    engine: sa.Engine,
    database: str,
    server_port: int,
    process: t.Any,
    until: t.Callable[[], bool],
) -> dict[int, int]:
    """The most connections each pid held over the samples taken until ``until()``."""
    most: dict[int, int] = {}
    while True:
        for pid, number in sample(engine, database, server_port, process.pid).items():
            most[pid] = max(most.get(pid, 0), number)
        if until():
            return most
        time.sleep(SAMPLE_EVERY)


def left(engine: sa.Engine) -> int:
    with solidq_db.read(engine) as connection:
        return sum(
            connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            for table in (READY, CLAIMED)
        )


def measure(
    backend: str, server_url: str, layout: str, jobs: int
) -> list[tuple[str, str, str, int, int]]:
    """(layout, phase, kind, processes of that kind, connections of each) rows."""
    processes, threads = (int(part) for part in layout.split("x"))
    url, drop = common.scratch_database(backend, server_url)
    database = str(sa.make_url(url).database)
    server_port = sa.make_url(url).port or (5432 if backend == "postgres" else 3306)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-connections-"))
    rows: list[tuple[str, str, str, int, int]] = []
    try:
        app = common.create_app(url)
        with app.app_context():
            engine = app.extensions["solidq"].engine
            bench_app.create_tables(engine)
            arguments = ["--processes", str(processes), "--threads", str(threads)]
            with (workdir / "worker.log").open("wb") as log:
                process = common.start_work(url, arguments, log, config=RECURRING)
                try:
                    rows += _phases(app, engine, database, server_port, process, layout, jobs)
                finally:
                    common.stop_work(process)
                    common.kill_work(process)
            app.extensions["solidq"].dispose()
    finally:
        drop()
        shutil.rmtree(workdir, ignore_errors=True)
    return rows


def _phases(
    app: t.Any,
    engine: sa.Engine,
    database: str,
    server_port: int,
    process: t.Any,
    layout: str,
    jobs: int,
) -> list[tuple[str, str, str, int, int]]:
    processes = int(layout.split("x")[0])
    expected = processes + 3  # workers, dispatcher, scheduler, supervisor (by its pid)
    deadline = time.monotonic() + 60
    while len(kinds(engine, process.pid)) < expected:
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError("flask solidq work didn't register its processes within 60 s")
        time.sleep(0.2)
    rows = []
    settle = time.monotonic() + 3
    most = watch(engine, database, server_port, process, lambda: time.monotonic() > settle)
    rows += _by_kind(layout, "idle", most, kinds(engine, process.pid))
    for phase, job in (("no-op drain", bench_app.noop), ("writing jobs", bench_app.record_start)):
        with app.app_context():
            for start in range(0, jobs, 1000):
                batch = [
                    job.new(index) if job is bench_app.noop else job.new()
                    for index in range(start, min(jobs, start + 1000))
                ]
                common.solidq.perform_all_later(batch)
        most = watch(engine, database, server_port, process, lambda: left(engine) == 0)
        rows += _by_kind(layout, phase, most, kinds(engine, process.pid))
    return rows


def _by_kind(
    layout: str, phase: str, most: dict[int, int], kind_of: dict[int, str]
) -> list[tuple[str, str, str, int, int]]:
    """One row per kind: how many processes, and the most connections one of them held."""
    grouped: dict[str, list[int]] = collections.defaultdict(list)
    for pid, kind in kind_of.items():
        grouped[kind].append(most.get(pid, 0))
    if most.get(-1):
        grouped["(unmapped)"].append(most[-1])
    return [
        (layout, phase, kind, len(numbers), max(numbers))
        for kind, numbers in sorted(grouped.items())
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="postgres,mysql", help="backends to measure")
    parser.add_argument("--layouts", default="2x3,1x10", help="processes x threads to run")
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per drain phase")
    options = parser.parse_args()
    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    rows: list[list[object]] = []
    for backend, server_url in chosen:
        for layout in options.layouts.split(","):
            for row in measure(backend, server_url, layout, options.jobs):
                rows.append([backend, *row])
            print(f"# {backend} {layout} done", flush=True)
    print()
    print("Connections to the queue's database per process of `flask solidq work` (the most")
    print("seen in any sample of the phase, of any process of that kind)")
    headers = ["backend", "layout", "phase", "kind", "processes", "connections each (max)"]
    print(common.table(headers, rows))


if __name__ == "__main__":
    main()
