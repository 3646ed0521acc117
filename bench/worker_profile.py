"""cProfile in every thread of a forked worker process, timed in CPU (``time.thread_time``),
for finding where a worker's CPU per job goes.

    SOLIDQ_BENCH_PROFILE=/tmp/prof python bench/throughput.py --jobs 20000 --layouts 1x3
    python bench/worker_profile.py /tmp/prof

With ``SOLIDQ_BENCH_PROFILE`` set, :func:`bench.app.create_app` calls :func:`install`: each
process forked from then on profiles its main thread and every thread it starts, and writes
each thread's stats to ``<prefix>-<pid>-<thread>.prof`` every :data:`DUMP_EVERY` seconds (a
forked worker ends with ``os._exit``: there is no exit to dump at). Run as a script, it sums
the files of a prefix and prints the CPU per job of the stages of a job's life, by the
cumulative time of the functions that hold them, and each thread's own total
(``SOLIDQ_BENCH_PROFILE_TOP=30``: the 30 functions with the most time of their own, too).

A deterministic profiler costs more than what it measures in small functions: read the
stages' shares, not their absolute times (``bench/throughput.py`` gives the CPU per job
without a profiler).
"""

from __future__ import annotations

import cProfile
import glob
import marshal
import os
import pstats
import sys
import threading
import time
import typing as t

#: Seconds between two writes of the stats.
DUMP_EVERY = 0.5

_profilers: list[tuple[str, cProfile.Profile]] = []


def install(prefix: str) -> None:
    """Profile every process forked from now on."""
    os.register_at_fork(after_in_child=lambda: _start(prefix))


def _start(prefix: str) -> None:
    _profilers.clear()
    threading.Thread(target=_dump_forever, args=(prefix,), daemon=True).start()
    _enable("main")
    threading.setprofile(_first_event)


def _enable(name: str) -> None:
    profiler = cProfile.Profile(time.thread_time)
    _profilers.append((name, profiler))
    profiler.enable()


def _first_event(frame: t.Any, event: str, arg: t.Any) -> None:
    """A new thread's first profile event: profile the thread from here on (``enable``
    replaces this function for the thread)."""
    _enable(threading.current_thread().name)


def _dump_forever(prefix: str) -> None:
    while True:
        time.sleep(DUMP_EVERY)
        for index, (name, profiler) in enumerate(list(_profilers)):
            profiler.snapshot_stats()  # not create_stats: that would disable it
            path = f"{prefix}-{os.getpid()}-{index}-{name}.prof"
            with open(path + ".tmp", "wb") as file:
                marshal.dump(profiler.stats, file)  # type: ignore[attr-defined]
            os.replace(path + ".tmp", path)


#: The stages of a job's life and the functions whose cumulative time holds each (a thread's
#: own loop never returns, so its cumulative time is never counted: the threads' totals are
#: printed apart, from the files). The job lines go straight to ``flask solidq work``'s
#: handler, with no record made (see :func:`flask_solidq.logging.subscriber.log`).
STAGES = {
    "claim (Worker._claim, the main thread)": ["worker.py:_claim"],
    "hand-off to the pool (Worker._post)": ["worker.py:_post"],
    "perform (execute.perform_in_app)": ["execute.py:perform_in_app"],
    "  app context push + pop (Flask, Flask-SQLAlchemy)": ["ctx.py:__enter__", "ctx.py:__exit__"],
    "  load the job (job_loading.load)": ["job_loading.py:load"],
    "  signals sent (blinker send, receivers included)": ["base.py:send", "signals.py:send"],
    "    the job_started line (its receiver)": ["subscriber.py:receive"],
    "the job_finished line (log_performed)": ["subscriber.py:log_performed"],
    "  the two lines written (subscriber._write_line)": ["subscriber.py:_write_line"],
    "    their fields' text (fields.format_fields)": ["fields.py:format_fields"],
    "    formatting + hand-off (formats.write_line)": ["formats.py:write_line"],
    "hand the outcome to the finisher (Finisher.add)": ["finisher.py:add"],
    "store outcomes (Finisher._store: finalize)": ["finisher.py:_store"],
}


def report(prefix: str) -> None:
    """Print the stages' CPU per job from the files of ``prefix``, then each thread's."""
    files = sorted(glob.glob(f"{prefix}-*.prof"))
    stats = pstats.Stats(*files)
    raw = stats.stats  # type: ignore[attr-defined]
    jobs = sum(
        calls
        for (path, _, name), (_, calls, *_rest) in raw.items()
        if name == "perform_in_app" and path.endswith("execute.py")
    )
    jobs = max(jobs, 1)
    total = sum(inline for (_, _, inline, _, _) in raw.values())
    print(f"{len(files)} threads, {jobs:,} jobs, {total / jobs * 1e6:.0f} µs CPU/job profiled")
    for stage, patterns in STAGES.items():
        seconds = 0.0
        for pattern in patterns:
            where, _, function = pattern.partition(":")
            for (path, _, name), (_, _, _, cumulative, _) in raw.items():
                if name == function and path.endswith("/" + where):
                    seconds += cumulative
        share = seconds / total * 100 if total else 0.0
        print(f"{stage:52} {seconds / jobs * 1e6:7.1f} µs/job {share:5.1f} %")
    for path in files:
        own = sum(inline for (_, _, inline, _, _) in pstats.Stats(path).stats.values())  # type: ignore[attr-defined]
        name = path[len(prefix) + 1 :].removesuffix(".prof")
        print(f"thread {name:45} {own / jobs * 1e6:7.1f} µs/job {own / total * 100:5.1f} %")
    if os.environ.get("SOLIDQ_BENCH_PROFILE_TOP"):
        stats.sort_stats("tottime").print_stats(int(os.environ["SOLIDQ_BENCH_PROFILE_TOP"]))


if __name__ == "__main__":
    report(sys.argv[1])
