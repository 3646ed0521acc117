"""Workers on separate hosts: 1, 2, 4 and 8 network namespaces, each with its own address and
hostname, draining one queue on a database server outside them.

    sudo python bench/scaleout.py [--hosts 0,1,2,4,8] [--jobs 20000] [--rounds 2]
                                  [--processes 2] [--threads 3] [--backends postgres,mysql]

Each "host" is a Linux network namespace joined to this one by a veth pair, with a /30 subnet
of its own (10.214.<n>.0/30: the namespace is .2, this side .1), and its own UTS namespace,
so its processes report a hostname of their own (``solidq-host-<n>``). The database servers
listen on 127.0.0.1 only: a ``socat`` in this namespace, bound to each host's gateway address
on the server's port, forwards to it (one forked ``socat`` per connection), so every worker
reaches "the server on another host" at an address of its own. Host 0 (``--hosts 0``) is the
baseline: one supervisor in this namespace, connected to 127.0.0.1 directly.

For each backend, in one scratch database (dropped at the end), for each number of hosts H
(rounds interleaved, each round in a rotated order):

1. the ``default`` queue is paused and ``--jobs`` no-op jobs are enqueued in bulk;
2. each host starts ``flask --app bench.app:create_app solidq work --only worker --processes
   2 --threads 3 --polling-interval 0.1`` (fork mode) with the database URL of its gateway;
   once all 2 x H workers are registered (and 2 s more, for their boot to end), the queue is
   resumed;
3. when nothing is ready or claimed, every supervisor gets SIGTERM;
4. the check, from the database and the workers' run logs (each host has its own): every job
   has ``finished_at``, no execution row is left, every job id was started exactly once
   across all hosts; and how the jobs spread over the hosts (fewest - most per host).

jobs/s is measured from the jobs' own ``finished_at`` stamps, as ``bench/throughput.py`` does.
Every namespace, link and forwarder is removed at exit, also on Ctrl-C or an error (and
leftovers of a killed run are removed at the start).

The hosts share this machine's 2 cores (and the database server's): what this shows is that
the queue works across addresses and hostnames (every job exactly once, no host-local
assumption), and how the rate holds as the worker processes multiply; not a scale-out of CPU.
Needs root, iproute2's ``ip``, ``unshare`` (util-linux) and ``socat``.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import contextlib
import datetime as dt
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from bench import common  # noqa: E402
from bench import throughput  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.operations import queues  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)
PREFIX = "sqscale"
SUBNET = "10.214"


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


class Host:
    """One network namespace behind a veth link, reaching this namespace at :attr:`gateway`."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.namespace = f"{PREFIX}-{number}"
        self.outer = f"{PREFIX}o{number}"
        self.inner = f"{PREFIX}i{number}"
        self.gateway = f"{SUBNET}.{number}.1"
        self.address = f"{SUBNET}.{number}.2"
        self.hostname = f"solidq-host-{number}"
        self.forwarders: list[subprocess.Popen[bytes]] = []

    def create(self, ports: t.Iterable[int]) -> None:
        self.remove()
        _ip("netns", "add", self.namespace)
        _ip("link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
        _ip("link", "set", self.inner, "netns", self.namespace)
        _ip("addr", "add", f"{self.gateway}/30", "dev", self.outer)
        _ip("link", "set", self.outer, "up")
        inside = ["netns", "exec", self.namespace, "ip"]
        _ip(*inside, "addr", "add", f"{self.address}/30", "dev", self.inner)
        _ip(*inside, "link", "set", self.inner, "up")
        _ip(*inside, "link", "set", "lo", "up")
        for port in ports:
            listen = f"TCP-LISTEN:{port},bind={self.gateway},fork,reuseaddr,backlog=256"
            self.forwarders.append(
                subprocess.Popen(
                    ["socat", listen, f"TCP:127.0.0.1:{port},nodelay"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        for port in ports:
            _wait_listening(self.gateway, port)

    @property
    def prefix(self) -> list[str]:
        """Run a command in the namespace, under a hostname of its own (every step execs)."""
        set_name = f'hostname {self.hostname} && exec "$@"'
        return [
            "ip",
            "netns",
            "exec",
            self.namespace,
            "unshare",
            "--uts",
            "sh",
            "-c",
            set_name,
            "sh",
        ]

    def remove(self) -> None:
        for forwarder in self.forwarders:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(forwarder.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                forwarder.wait(5)
        self.forwarders = []
        _ip("link", "del", self.outer, check=False)
        _ip("netns", "del", self.namespace, check=False)


def _wait_listening(address: str, port: int) -> None:
    import socket

    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Hosts:
    """Hosts 1..count with forwarders to ``ports``; all removed on exit, atexit and SIGINT."""

    def __init__(self, count: int, ports: list[int]) -> None:
        self.hosts = [Host(number) for number in range(1, count + 1)]
        self.ports = ports

    def __enter__(self) -> list[Host]:
        atexit.register(self.remove)
        try:
            for host in self.hosts:
                host.create(self.ports)
        except BaseException:
            self.remove()
            raise
        return self.hosts

    def __exit__(self, *exc_info: t.Any) -> None:
        self.remove()

    def remove(self) -> None:
        for host in self.hosts:
            host.remove()


def _sigterm_as_interrupt(signum: int, frame: t.Any) -> None:
    raise KeyboardInterrupt


# --- one drain -----------------------------------------------------------------------------


class Drain(t.NamedTuple):
    hosts: int
    rate: float | None
    from_resume: float | None
    spread: str
    check: str
    problems: list[str]


def host_url(url: str, host: Host | None) -> str:
    if host is None:
        return url
    return sa.make_url(url).set(host=host.gateway).render_as_string(hide_password=False)


def drain(
    url: str,
    engine: sa.Engine,
    count: int,
    hosts: list[Host | None],
    workdir: pathlib.Path,
    options: argparse.Namespace,
) -> Drain:
    """Enqueue ``count`` jobs into the paused queue, start a supervisor per host, resume, wait,
    stop, check."""
    from flask import current_app

    queues.pause(engine, "default")
    first_id = throughput.enqueue(current_app, count)
    arguments = ["--only", "worker", "--processes", str(options.processes)]
    arguments += ["--threads", str(options.threads), "--polling-interval", "0.1", "--mode", "fork"]
    started: list[tuple[t.Any, pathlib.Path, pathlib.Path]] = []
    problems: list[str] = []
    resumed = 0.0
    try:
        for index, host in enumerate(hosts):
            run_log = workdir / f"runs-{len(hosts)}-{index}.txt"
            run_log.unlink(missing_ok=True)
            output = workdir / f"worker-{len(hosts)}-{index}.log"
            with output.open("wb") as log:
                process = common.start_work(
                    host_url(url, host),
                    arguments,
                    log,
                    env={"SOLIDQ_BENCH_RUN_LOG": str(run_log)},
                    prefix=host.prefix if host is not None else (),
                )
            started.append((process, run_log, output))
        wait_registered(engine, len(hosts) * options.processes, [p for p, _, _ in started])
        time.sleep(2.0)
        resumed = time.time()
        queues.resume(engine, "default")
        deadline = time.monotonic() + options.timeout
        while common.jobs_left(engine):
            if any(process.poll() is not None for process, _, _ in started):
                problems.append("a supervisor exited early")
                break
            if time.monotonic() > deadline:
                problems.append(f"not drained after {options.timeout:.0f} s")
                break
            time.sleep(0.25)
    finally:
        problems += stop_all([process for process, _, _ in started])
    for _, _, output in started:
        problems += common.log_problems(output.read_text(errors="replace"))
    return check(engine, first_id, count, len(hosts), resumed, [r for _, r, _ in started], problems)


def stop_all(processes: list[t.Any], timeout: float = 30.0) -> list[str]:
    """SIGTERM every supervisor at once (one SIGTERM each: a second one means "stop now"),
    wait for them all, kill what is left; say what had to be killed."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    problems = []
    for process in processes:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            problems.append(f"a supervisor didn't stop within {timeout:.0f} s of SIGTERM; killed")
        common.kill_work(process)
    return problems


def wait_registered(engine: sa.Engine, workers: int, processes: list[t.Any]) -> None:
    deadline = time.monotonic() + 120
    while True:
        with solidq_db.read(engine) as connection:
            registered = connection.execute(
                sa.select(sa.func.count())
                .select_from(PROCESSES)
                .where(PROCESSES.c.kind == "Worker")
            ).scalar_one()
        if registered >= workers:
            return
        if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
            raise RuntimeError(f"{registered} of {workers} workers registered; see their logs")
        time.sleep(0.1)


def check(
    engine: sa.Engine,
    first_id: int,
    count: int,
    hosts: int,
    resumed: float,
    run_logs: list[pathlib.Path],
    problems: list[str],
) -> Drain:
    stamps, leftovers = throughput.finish_stamps_and_leftovers(engine, first_id)
    runs: collections.Counter[int] = collections.Counter()
    per_host = []
    for run_log in run_logs:
        ids = [int(line) for line in run_log.read_text().split()] if run_log.exists() else []
        per_host.append(len(ids))
        runs.update(job_id for job_id in ids if job_id >= first_id)
    twice = sorted(job_id for job_id, seen in runs.items() if seen > 1)
    issues = []
    if len(stamps) != count:
        issues.append(f"{len(stamps)} of {count} finished")
    issues += [f"{number} {name}" for name, number in leftovers.items() if number]
    if len(runs) != count:
        issues.append(f"{len(runs)} of {count} ids in the run logs")
    if twice:
        issues.append(f"{len(twice)} jobs ran more than once (e.g. ids {twice[:5]})")
    rate = from_resume = None
    if len(stamps) >= 2:
        first, last = stamps[0], stamps[-1]
        in_first = sum(1 for stamp in stamps if stamp == first)
        if last > first:
            rate = (len(stamps) - in_first) / (last - first).total_seconds()
        resume_at = dt.datetime.fromtimestamp(resumed, dt.timezone.utc).replace(tzinfo=None)
        if stamps[-1].tzinfo is not None:
            resume_at = resume_at.replace(tzinfo=dt.timezone.utc)
        from_resume = count / (last - resume_at).total_seconds()
    spread = f"{min(per_host):,} - {max(per_host):,}" if per_host else "-"
    text = "; ".join(issues) if issues else f"all {count:,} exactly once"
    return Drain(hosts, rate, from_resume, spread, text, problems)


# --- the command ----------------------------------------------------------------------------


def run_backend(backend: str, server_url: str, options: argparse.Namespace) -> list[Drain]:
    counts = [int(part) for part in options.hosts.split(",") if part.strip()]
    port = sa.make_url(server_url).port or (5432 if backend == "postgres" else 3306)
    url, drop = common.scratch_database(backend, server_url)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-scaleout-"))
    drains: list[Drain] = []
    try:
        with Hosts(max(counts), [port]) as all_hosts:
            app = common.create_app(url)
            with app.app_context():
                engine = app.extensions["solidq"].engine
                for round_index in range(options.rounds):
                    shift = round_index % len(counts)
                    for count in counts[shift:] + counts[:shift]:
                        hosts: list[Host | None] = list(all_hosts[:count]) if count else [None]
                        result = drain(url, engine, options.jobs, hosts, workdir, options)
                        drains.append(result._replace(hosts=count))
                        print(
                            f"# {backend} round {round_index + 1}: {_row(backend, drains[-1])}",
                            flush=True,
                        )
                app.extensions["solidq"].dispose()
    finally:
        drop()
        shutil.rmtree(workdir, ignore_errors=True)
    return drains


def _row(backend: str, d: Drain) -> list[object]:
    hosts = "0 (local)" if d.hosts == 0 else str(d.hosts)
    rate = "-" if d.rate is None else f"{d.rate:,.0f}"
    from_resume = "-" if d.from_resume is None else f"{d.from_resume:,.0f}"
    return [backend, hosts, rate, from_resume, d.spread, d.check]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", default="0,1,2,4,8", help="hosts to try (0: local baseline)")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per drain")
    parser.add_argument("--rounds", type=int, default=2, help="times each host count drains")
    parser.add_argument("--processes", type=int, default=2, help="worker processes per host")
    parser.add_argument("--threads", type=int, default=3, help="threads per worker process")
    parser.add_argument("--backends", default="postgres,mysql", help="backends to measure")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a drain may take")
    options = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("Network namespaces need root: run it with sudo.")
    for tool in ("ip", "unshare", "socat"):
        if shutil.which(tool) is None:
            raise SystemExit(
                f"{tool} is not installed (apt-get install iproute2 util-linux socat)."
            )
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    rows = []
    problems = []
    for backend, server_url in chosen:
        for d in run_backend(backend, server_url, options):
            rows.append(_row(backend, d))
            problems += [f"{backend} {d.hosts} hosts: {line}" for line in d.problems]
    print()
    print(
        f"No-op jobs/s with workers on H hosts ({options.processes} x {options.threads} each;"
        f" {options.jobs:,} jobs per drain, {options.rounds} round(s))"
    )
    headers = ["backend", "hosts", "jobs/s", "jobs/s from resume", "jobs per host", "check"]
    print(common.table(headers, sorted(rows, key=lambda row: (str(row[0]), str(row[1])))))
    print()
    print("\n".join(problems) if problems else "Worker output: INFO lines only.")
    print(f"# load at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
