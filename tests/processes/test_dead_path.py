"""A dead network path: `flask solidq work` runs on a second host (a network namespace, see
:mod:`tests.support.netns`) and reaches the database through a link that the test takes down
mid-run.

Packets are then dropped without a FIN or an RST, so only the connections' own timeouts can
notice (``SOLIDQ_DATABASE_DEAD_CONNECTION_TIMEOUT``: TCP keepalives and ``tcp_user_timeout`` on
PostgreSQL, read and write timeouts on MariaDB). Without them the processes hung for the
kernel's two hours. Here every process must say within a bound that it can't reach the
database, keep running, resume within :data:`RESUME_BOUND` of the link coming back, and lose
or repeat no job.

Inside the namespace the host's loopback is out of reach, so the worker connects through a
plain forwarder (:class:`~tests.support.fault_proxy.FaultProxy`, always passing) on this host's end
of the link, and the jobs record their runs in a file (files cross namespaces; the database
does not while the link is down).
"""

from __future__ import annotations

import collections
import re
import time
import typing as t

import pytest
import sqlalchemy as sa
from flask import current_app

from tests import support
from tests.processes import test_faults
from tests.support import fault_proxy
from tests.support import netns
from tests.support import runtime as runtime_support

if t.TYPE_CHECKING:
    import pathlib

pytestmark = pytest.mark.processes

JOB_NAME = "dead_path_test.step"
#: ``SOLIDQ_DATABASE_DEAD_CONNECTION_TIMEOUT`` in the test (30 s by default, shortened to keep
#: the suite quick; the README gives the default's figures, measured by hand).
DEAD_TIMEOUT = 4
#: The queue's statement timeout in the test: on MariaDB a reply may take it plus the
#: dead-connection timeout before the path counts as dead.
STATEMENT_TIMEOUT = 3
#: The most seconds from the link going down to every process having said so: the slowest
#: detection (MariaDB's read timeout, the dead timeout plus the statement timeout) plus a
#: poll's back-off and the time to log.
NOTICE_BOUND = DEAD_TIMEOUT + STATEMENT_TIMEOUT + 12
#: The most seconds between the link coming back and the next job starting: a poll that
#: failed backs off up to 10 s, and a connect attempt in flight may take its timeout.
RESUME_BOUND = 20.0
SETTLE_TIMEOUT = 60.0
KINDS = ["Dispatcher", "Supervisor(fork)", "Worker"]
UNREACHABLE = re.compile(r"SolidQ (\S+) \S+ can't reach the database")

CONFIG: dict[str, t.Any] = {
    "SOLIDQ_DATABASE_DEAD_CONNECTION_TIMEOUT": DEAD_TIMEOUT,
    "SOLIDQ_DATABASE_STATEMENT_TIMEOUT": STATEMENT_TIMEOUT,
    "SOLIDQ_DATABASE_CONNECT_TIMEOUT": 3,
    # Longer than the outage, as in production: nobody is pruned for it.
    "SOLIDQ_PROCESS_ALIVE_THRESHOLD": 120,
    "SOLIDQ_WORKERS": [{"queues": "*", "threads": 3, "processes": 1, "polling_interval": 0.05}],
}


@support.solidq.job(name=JOB_NAME)
def step(value: str, seconds: float) -> None:
    """Sleep ``seconds``, then append ``value`` to the runs file (one line per run)."""
    time.sleep(seconds)
    with open(current_app.config["DEAD_PATH_RUNS_FILE"], "a") as runs:
        runs.write(f"{value}\n")


def runs(path: pathlib.Path) -> collections.Counter[str]:
    text = path.read_text() if path.exists() else ""
    return collections.Counter(line for line in text.splitlines() if line)


def noticed_by(output: str) -> set[str]:
    """The kinds of process that logged that they can't reach the database."""
    return set(UNREACHABLE.findall(output))


@pytest.fixture
def isolated_host() -> t.Iterator[netns.IsolatedHost]:
    # Skipped where it can't run; CI runs as root, where SOLIDQ_REQUIRE_ALL_BACKENDS fails
    # the run on any skip, so there it always runs.
    reason = netns.available()
    if reason:
        pytest.skip(reason)
    with netns.IsolatedHost() as host:
        yield host


@pytest.mark.parametrize("database_url", test_faults.server_backends(), indirect=True)
def test_a_link_gone_silent_is_noticed_by_every_process_and_work_resumes_when_it_returns(
    database_url: str,
    app,
    engine,
    isolated_host: netns.IsolatedHost,
    tmp_path: pathlib.Path,
):
    backend = sa.make_url(database_url).get_backend_name()
    runs_file = tmp_path / "runs.txt"
    with fault_proxy.FaultProxy.for_url(
        database_url, lifetime=240, listen_host=isolated_host.gateway
    ) as forwarder:
        launcher = runtime_support.Launcher(
            forwarder.url(database_url), tmp_path, prefix=isolated_host.exec_prefix
        )
        try:
            work = launcher.start(config={**CONFIG, "DEAD_PATH_RUNS_FILE": str(runs_file)})
            runtime_support.wait_for_kinds(engine, KINDS)
            jobs = test_faults.enqueue_backlog(app, "dead", 300, 0.02, job=step)
            support.wait_until(lambda: sum(runs(runs_file).values()) >= 30, timeout=30)

            isolated_host.link_down()
            downed = time.monotonic()
            try:
                support.wait_until(
                    lambda: noticed_by(work.output()) == set(KINDS), timeout=NOTICE_BOUND
                )
            except AssertionError:
                raise AssertionError(f"not every process noticed:\n{work.output()}") from None
            noticed = time.monotonic() - downed

            at_heal = sum(runs(runs_file).values())
            isolated_host.link_up()
            healed = time.monotonic()
            support.wait_until(
                lambda: sum(runs(runs_file).values()) > at_heal, timeout=RESUME_BOUND
            )
            resumed = time.monotonic() - healed
            support.wait_until(lambda: test_faults.settled(engine, jobs), timeout=SETTLE_TIMEOUT)

            failed = test_faults.check_exactly_once(engine, jobs, runs(runs_file))
            assert runtime_support.kinds(engine) == sorted(KINDS)  # nobody pruned or replaced
            output = work.output()
            assert "database reachable again" in output
            # A warning per process and outage, not one per poll (a second outage: a pooled
            # connection that died in the first is found dead on its next use).
            warnings = collections.Counter(UNREACHABLE.findall(output))
            assert max(warnings.values()) <= 2, output
            test_faults.report(
                backend,
                f"link down: every process noticed within {noticed:.1f}s (dead-connection"
                f" timeout {DEAD_TIMEOUT}s), resumed {resumed:.2f}s after the link came back,"
                f" {failed} failed",
            )
        finally:
            launcher.kill_all()
