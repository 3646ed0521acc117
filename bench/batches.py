"""What a batch costs: enqueuing and draining jobs in a batch beside the same jobs in none, and
how soon its callback starts after its last job finishes.

    python bench/batches.py [--jobs 10000] [--rounds 3] [--backends sqlite,postgres,mysql]

For each backend, in a scratch database, ``--rounds`` times (in alternating order):

1. enqueue ``--jobs`` no-op jobs with one ``perform_all_later``, then the same number inside
   ``with solidq.batch(on_finish=bench.batch_done):``: the wall time of each call;
2. with one ``flask solidq work --only worker --processes 1 --threads 3`` running (the queue
   paused while both are stored), drain the plain jobs and the batch's, one after the other:
   jobs/s from the jobs' own ``finished_at`` stamps (as bench/throughput.py measures), and,
   in the rounds where the batch drains last, its callback's start after its last
   ``finished_at``;
3. then 20 batches of 100 jobs one after another, each waited for: the callback's start after
   the batch's last job, p50 and p90.

Every run checks each batch's counters against its jobs (completed == total, nothing pending)
and that each callback ran once.
"""

from __future__ import annotations

import argparse
import datetime as dt
import pathlib
import statistics
import sys
import tempfile
import time
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402
from flask import Flask  # noqa: E402

from bench import app as bench_app  # noqa: E402
from bench import common  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402

JOBS = models.JobRecord.__table__
SMALL_BATCHES = 20
SMALL_BATCH_JOBS = 100


def timed_enqueue(app: Flask, count: int, *, in_batch: bool) -> tuple[float, int | None]:
    """Seconds one ``perform_all_later`` of ``count`` no-op jobs took (and the batch's id)."""
    jobs = [bench_app.noop.new(index) for index in range(count)]
    with app.app_context():
        started = time.perf_counter()
        if in_batch:
            with common.solidq.batch(on_finish=bench_app.batch_done) as batch:
                common.solidq.perform_all_later(jobs)
            return time.perf_counter() - started, batch.id
        common.solidq.perform_all_later(jobs)
        return time.perf_counter() - started, None


def wait_until(condition: t.Callable[[], bool], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not done after {timeout:.0f} s")
        time.sleep(0.05)


def stamps(engine: sa.Engine, batch_id: int | None, first_id: int) -> list[dt.datetime]:
    """The finish stamps of the no-op jobs from ``first_id`` on, of the batch or of none (the
    callbacks, in no batch, left out)."""
    where = JOBS.c.batch_id == batch_id if batch_id else JOBS.c.batch_id.is_(None)
    where = sa.and_(where, JOBS.c.class_name == bench_app.noop.job_name)
    with solidq_db.read(engine) as connection:
        return sorted(
            connection.scalars(
                sa.select(JOBS.c.finished_at).where(
                    where, JOBS.c.id >= first_id, JOBS.c.finished_at.is_not(None)
                )
            )
        )


def rate(finished: list[dt.datetime]) -> float | None:
    """Jobs/s from the finish stamps, leaving out the first group commit's (see
    bench/throughput.py)."""
    if len(finished) < 2 or finished[-1] <= finished[0]:
        return None
    first = sum(1 for stamp in finished if stamp == finished[0])
    return (len(finished) - first) / (finished[-1] - finished[0]).total_seconds()


def callback_started(engine: sa.Engine, batch_id: int) -> list[float]:
    table = bench_app.batch_callbacks
    with solidq_db.read(engine) as connection:
        return list(
            connection.scalars(sa.select(table.c.started_at).where(table.c.batch_id == batch_id))
        )


def max_id(engine: sa.Engine) -> int:
    with solidq_db.read(engine) as connection:
        return int(connection.scalar(sa.select(sa.func.coalesce(sa.func.max(JOBS.c.id), 0))))


def check(app: Flask, batch_id: int, engine: sa.Engine) -> str:
    with app.app_context():
        batch = common.solidq.batches.find(batch_id)
    runs = callback_started(engine, batch_id)
    if batch is None or batch.pending_jobs or batch.completed_jobs != batch.total_jobs:
        return f"batch {batch_id}: {batch}"
    return "" if len(runs) == 1 else f"batch {batch_id}'s callback ran {len(runs)} times"


def drain_round(app: Flask, engine: sa.Engine, count: int, batch_first: bool) -> dict[str, t.Any]:
    """Enqueue both ways, then drain both (the worker runs): the figures of one round."""
    figures: dict[str, t.Any] = {"problems": []}
    first_id = max_id(engine) + 1
    order = [True, False] if batch_first else [False, True]
    batch_id = None
    # Paused while both are stored: the worker drains one after the other, not the first
    # while the second is being enqueued.
    with app.app_context():
        common.solidq.pause("default")
    for in_batch in order:
        seconds, made = timed_enqueue(app, count, in_batch=in_batch)
        figures["enqueue_batch" if in_batch else "enqueue_plain"] = count / seconds
        batch_id = made or batch_id
    assert batch_id is not None
    with app.app_context():
        common.solidq.resume("default")
    wait_until(
        lambda: len(callback_started(engine, batch_id)) >= 1 and not common.jobs_left(engine)
    )
    plain, batched = stamps(engine, None, first_id), stamps(engine, batch_id, first_id)
    figures["drain_plain"], figures["drain_batch"] = rate(plain), rate(batched)
    (started,) = callback_started(engine, batch_id) or [None]
    # Only when the batch drained last: else its callback waits behind the plain jobs, which
    # is the queue's order, not the callback's delay.
    last = not batch_first
    figures["callback_ms"] = (started - batched[-1].timestamp()) * 1000 if last else None
    figures["problems"] += [problem for problem in [check(app, batch_id, engine)] if problem]
    return figures


def latency_series(app: Flask, engine: sa.Engine) -> tuple[list[float], list[str]]:
    """Milliseconds from each small batch's last finished job to its callback's start."""
    latencies, problems = [], []
    for _ in range(SMALL_BATCHES):
        _seconds, batch_id = timed_enqueue(app, SMALL_BATCH_JOBS, in_batch=True)
        assert batch_id is not None
        wait_until(lambda done=batch_id: bool(callback_started(engine, done)))
        (started,) = callback_started(engine, batch_id)
        last = stamps(engine, batch_id, 0)[-1]
        latencies.append((started - last.timestamp()) * 1000)
        problems += [problem for problem in [check(app, batch_id, engine)] if problem]
    return latencies, problems


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,postgres,mysql")
    options = parser.parse_args()
    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)

    rows, latency_rows, problems = [], [], []
    for backend, server_url in chosen:
        url, drop = common.scratch_database(backend, server_url)
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-batches-"))
        log_path = workdir / "worker.log"
        try:
            app = common.create_app(url)
            with app.app_context():
                engine = app.extensions["solidq"].engine
                bench_app.create_tables(engine)
            with log_path.open("wb") as log:
                arguments = ["--only", "worker", "--processes", "1", "--threads", "3"]
                process = common.start_work(url, arguments + ["--mode", "fork"], log)
                try:
                    rounds = [
                        drain_round(app, engine, options.jobs, batch_first=bool(round_ % 2))
                        for round_ in range(options.rounds)
                    ]
                    latencies, late_problems = latency_series(app, engine)
                finally:
                    common.stop_work(process)
                    common.kill_work(process)
            problems += common.log_problems(log_path.read_text(errors="replace"))
            problems += late_problems + [p for r in rounds for p in r["problems"]]
            for name in ("enqueue", "drain"):
                plain = [r[f"{name}_plain"] for r in rounds if r[f"{name}_plain"]]
                batch = [r[f"{name}_batch"] for r in rounds if r[f"{name}_batch"]]
                rows.append(
                    [
                        backend,
                        name,
                        statistics.median(plain),
                        statistics.median(batch),
                        f"{statistics.median(plain) / statistics.median(batch):.2f}x",
                    ]
                )
            callback = [r["callback_ms"] for r in rounds if r["callback_ms"] is not None]
            cuts = statistics.quantiles(latencies, n=10)
            latency_rows.append(
                [
                    backend,
                    f"{statistics.median(callback):.0f}" if callback else "-",
                    f"{statistics.median(latencies):.0f}",
                    f"{cuts[8]:.0f}",
                ]
            )
            with app.app_context():
                engine.dispose()
        finally:
            drop()
        print(f"# {backend} done", flush=True)

    print()
    print(f"Jobs/s, {options.jobs:,} no-op jobs, median of {options.rounds} rounds")
    print(common.table(["backend", "what", "no batch", "one batch", "cost"], rows))
    print()
    print(
        f"Callback start after the batch's last job finished, ms (the {options.jobs:,}-job"
        f" batches; {SMALL_BATCHES} batches of {SMALL_BATCH_JOBS})"
    )
    print(common.table(["backend", "big batch p50", "small p50", "small p90"], latency_rows))
    print()
    print("Problems: " + ("none" if not problems else "\n  " + "\n  ".join(problems)))


if __name__ == "__main__":
    main()
