"""Shared set-up of the benchmarks: which backends to measure, scratch databases, an app."""

from __future__ import annotations

import os
import shutil
import tempfile
import typing as t

import sqlalchemy as sa
from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from flask_solidq import SolidQ
from flask_solidq import models

DEFAULT_URLS = {
    "postgres": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "mysql": "mysql+pymysql://root@127.0.0.1:3306/test",
}
URL_VARIABLES = {"postgres": "SOLIDQ_TEST_POSTGRES_URL", "mysql": "SOLIDQ_TEST_MYSQL_URL"}

db = SQLAlchemy()
solidq = SolidQ()


@solidq.job(name="bench.noop")
def noop(value: int) -> None:
    """A job that does nothing, to measure the queue itself."""


def backends() -> list[tuple[str, str]]:
    """(name, server URL) of every backend that answers; SQLite always."""
    return chosen_backends("sqlite,postgres,mysql")


def scratch_database(backend: str, server_url: str) -> tuple[str, t.Callable[[], None]]:
    """A fresh database with the flask-solidq tables; returns its URL and a clean-up that
    drops it (for SQLite, the temporary directory that holds it)."""
    if backend == "sqlite":
        directory = tempfile.mkdtemp(prefix="solidq-bench-")
        url = f"sqlite:///{directory}/bench.db"
        drop = lambda: shutil.rmtree(directory, ignore_errors=True)  # noqa: E731
    else:
        from tests import support

        url = support.create_scratch_database(server_url)
        drop = lambda: support.drop_scratch_database(url)  # noqa: E731
    engine = sa.create_engine(url)
    models.metadata.create_all(engine)
    engine.dispose()
    return url, drop


def create_app(url: str, **config: t.Any) -> Flask:
    """An app with the queue on ``url``."""
    app = Flask("solidq_bench")
    app.config.update({"SQLALCHEMY_DATABASE_URI": url, "SOLIDQ_DASHBOARD": False, **config})
    db.init_app(app)
    solidq.init_app(app)
    return app


def table(headers: list[str], rows: list[list[t.Any]]) -> str:
    """A plain-text table, right-aligned numbers."""
    cells = [headers] + [
        [f"{cell:,.0f}" if isinstance(cell, float) else str(cell) for cell in row] for row in rows
    ]
    widths = [max(len(row[index]) for row in cells) for index in range(len(headers))]
    lines = [
        "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


# Helpers of the benchmarks that run `flask solidq work` (throughput.py, latency.py).

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK_APP = "bench.app:create_app"


def chosen_backends(names: str) -> list[tuple[str, str]]:
    """:func:`backends`, limited to the comma-separated ``names`` (sqlite,postgres,mysql);
    servers not named are not even tried."""
    wanted = {name.strip() for name in names.split(",") if name.strip()}
    unknown = wanted - {"sqlite", *URL_VARIABLES}
    if unknown:
        raise SystemExit(f"Unknown backends {sorted(unknown)}; choose from sqlite,postgres,mysql.")
    chosen = []
    if "sqlite" in wanted:
        chosen.append(("sqlite", ""))
    for name, variable in URL_VARIABLES.items():
        if name not in wanted:
            continue
        url = os.environ.get(variable, DEFAULT_URLS[name])
        try:
            engine = sa.create_engine(url)
            with engine.connect():
                pass
            engine.dispose()
        except Exception as exc:  # noqa: BLE001 - a backend that doesn't answer is left out
            print(f"# {name}: not measured ({exc.__class__.__name__})")
            continue
        chosen.append((name, url))
    return chosen


def machine_lines(chosen: list[tuple[str, str]]) -> list[str]:
    """What a reader needs to compare figures across runs: CPUs, load, Python, versions."""
    import platform
    import sqlite3

    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    lines = [
        f"# machine: {platform.platform()}; {cpus} CPUs ({usable} usable); load {load}",
        f"# Python {platform.python_version()}; SQLAlchemy {sa.__version__}",
    ]
    for name, url in chosen:
        if name == "sqlite":
            lines.append(f"# sqlite: {sqlite3.sqlite_version} (file in a temporary directory)")
            continue
        engine = sa.create_engine(url)
        with engine.connect() as connection:
            version = connection.exec_driver_sql("SELECT version()").scalar()
        engine.dispose()
        version = str(version).split(" on ")[0]
        lines.append(f"# {name}: {version} at {sa.make_url(url).render_as_string()}")
    return lines


def start_work(
    url: str,
    arguments: list[str],
    log: t.IO[bytes],
    *,
    config: dict[str, t.Any] | None = None,
    env: dict[str, str] | None = None,
    app: str = WORK_APP,
    prefix: t.Sequence[str] = (),
) -> t.Any:
    """Start ``flask --app APP solidq work ARGUMENTS`` (``bench.app:create_app`` by default)
    on ``url`` as a subprocess in a process group of its own, its output going to ``log``.
    ``prefix`` goes before the command: one that ``exec``s it (``ip netns exec NAME``) keeps
    the subprocess's pid the supervisor's."""
    import json
    import subprocess
    import sys

    variables = {
        **os.environ,
        "SOLIDQ_BENCH_DATABASE_URL": url,
        "SOLIDQ_BENCH_CONFIG": json.dumps(config or {}),
        "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    command = [*prefix, sys.executable, "-m", "flask", "--app", app, "solidq", "work", *arguments]
    return subprocess.Popen(
        command, cwd=ROOT, env=variables, stdout=log, stderr=log, start_new_session=True
    )


def stop_work(process: t.Any, timeout: float = 30.0) -> float | None:
    """SIGTERM the supervisor (it stops its children gracefully); the seconds it took to
    exit, or None when it didn't within ``timeout`` (then the whole group is killed)."""
    import signal
    import subprocess
    import time

    started = time.monotonic()
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_work(process)
        return None
    return time.monotonic() - started


def kill_work(process: t.Any) -> None:
    """SIGKILL what is left of a :func:`start_work` subprocess and its children."""
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def log_problems(text: str, limit: int = 12) -> list[str]:
    """The lines of a worker's output that aren't routine INFO lines."""
    routine = (" INFO ",)
    lines = [line for line in text.splitlines() if line.strip()]
    odd = [line for line in lines if not any(marker in line for marker in routine)]
    if len(odd) > limit:
        odd = odd[:limit] + [f"... and {len(odd) - limit} more lines"]
    return odd


def print_drain_details(details: list[list[t.Any]], problems: list[str]) -> None:
    """The per-drain table (wall time, stop time, exactly-once check) and the worker output
    other than routine INFO lines, as bench/throughput.py and bench/scale.py print them."""
    headers = ["backend", "run", "spawn to last finish s", "SIGTERM to exit s", "check"]
    print(table(headers, details))
    print()
    if problems:
        print("Worker output other than INFO lines:")
        print("\n".join(f"  {line}" for line in problems))
    else:
        print("Worker output: INFO lines only.")


def jobs_left(engine: sa.Engine) -> int:
    """Jobs ready or claimed: what a drain has still to finish."""
    with engine.connect() as connection:
        return sum(
            connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            for table in (models.ReadyExecution.__table__, models.ClaimedExecution.__table__)
        )
