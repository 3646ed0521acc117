"""The claim path under a rate limit, with and without the budgets' admission ring.

    python bench/admission_ring.py [--backends sqlite,postgres] [--jobs N] [--rounds R]

The ring (``solidq_rate_limits.admissions``,
:mod:`flask_solidq.controls.rate_limit.admission_ring`) is one more value in the UPDATE a claim
already makes to each budget it charges. This measures
what that costs: for each backend and round, two child processes each claim a backlog of
``--jobs`` rate-limited jobs, 10 per claim (``claim_batch``, in-process, no worker), in a
scratch database of their own; one imports flask_solidq from ``--before`` (default
/work/main: the code without the ring), the other from this checkout. The two alternate, so
a change of the machine's load hits both. The limit admits every job (``to`` and ``burst`` a
million per second, key "global"), so each claim locks, charges and rewrites one budget row,
whose ring fills to its 180 seconds when a drain lasts that long.

Reading the output: claims per second (10 jobs each) per backend, for each round and variant;
the median of the rounds last. The machine has few cores and the database runs on it too:
compare the two columns of one run, not runs.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
import typing as t

HERE = pathlib.Path(__file__).resolve().parents[1]
BATCH = 10
PROCESS_ID = 5151


def child(backend: str, server_url: str, jobs: int) -> dict[str, t.Any]:
    """Claim ``jobs`` limited jobs 10 at a time in a scratch database; claims per second."""
    from bench import common
    from flask_solidq import limits_rate
    from flask_solidq.operations import claim
    from tests import support

    solidq = common.solidq

    @solidq.job(name="bench.ring_limited")
    @limits_rate(to=1_000_000, per=1, burst=1_000_000, key="global")
    def limited(value: int) -> None:
        """Claimed, never run."""

    url, drop = common.scratch_database(backend, server_url)
    try:
        app = common.create_app(url)
        with app.app_context():
            engine = app.extensions["solidq"].engine
            for start in range(0, jobs, 1000):
                solidq.perform_all_later(
                    [limited.new(i) for i in range(start, min(start + 1000, jobs))]
                )
            support.register_claimers(engine, [PROCESS_ID])
            selector = claim.QueueSelector(("*",))
            claims, started = 0, time.perf_counter()
            while claim.claim_batch(engine, selector, BATCH, PROCESS_ID).jobs:
                claims += 1
            elapsed = time.perf_counter() - started
            app.extensions["solidq"].dispose()
        return {"claims": claims, "per_second": claims / elapsed}
    finally:
        drop()


def run_child(package_root: str, backend: str, server_url: str, jobs: int) -> float:
    environment = {**os.environ, "PYTHONPATH": f"{package_root}{os.pathsep}{HERE}"}
    output = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            backend,
            "--server-url",
            server_url,
            "--jobs",
            str(jobs),
        ],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE,
    ).stdout
    return float(json.loads(output.strip().splitlines()[-1])["per_second"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default="/work/main")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--server-url", default="", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        print(json.dumps(child(arguments.child, arguments.server_url, arguments.jobs)))
        return
    from bench import common

    for backend, server_url in common.chosen_backends(arguments.backends):
        rows, before, after = [], [], []
        for round_number in range(arguments.rounds):
            before.append(run_child(arguments.before, backend, server_url, arguments.jobs))
            after.append(run_child(str(HERE), backend, server_url, arguments.jobs))
            rows.append([round_number + 1, f"{before[-1]:.0f}", f"{after[-1]:.0f}"])
        rows.append(
            ["median", f"{statistics.median(before):.0f}", f"{statistics.median(after):.0f}"]
        )
        print(f"# {backend}: claims/s of {BATCH} rate-limited jobs, {arguments.jobs} jobs a drain")
        print(common.table(["round", "without ring", "with ring"], rows))


if __name__ == "__main__":
    main()
