"""The job queues bench/compare.py measures, one module each, behind one small interface.

Every peer runs the same job, :func:`bench.peers.stamps.stamp`, so the drain is timed the same
way for all of them: from the jobs' own start stamps, not from outside. A peer module holds its
job definition (the worker processes import it), and a :class:`Peer` that makes a scratch
database (or Redis db), enqueues into it from the benchmark's process, and names the worker
commands to start.
"""

from __future__ import annotations

import dataclasses
import pathlib
import signal
import sys
import typing as t

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent

#: Where the interpreter's console scripts are (``rq``, ``firm-queue``): the benchmark's venv.
BIN = pathlib.Path(sys.executable).parent

#: Jobs per call of each peer's bulk API, the same for all of them.
BATCH = 1000

#: Peer name -> its module under ``bench.peers``, in the order the tables list them.
MODULES = {
    "flask-solidq": "solidq",
    "pgqueuer": "pgqueuer_peer",
    "procrastinate": "procrastinate_peer",
    "rq": "rq_peer",
    "firm-queue": "firm_queue_peer",
}


@dataclasses.dataclass(frozen=True)
class Layout:
    """How one drain is worked: how many worker OS processes, with which settings."""

    processes: int
    #: What the table says about the settings, e.g. "3 threads (default)".
    settings: str
    #: The backlog is enqueued one job per call ("single") or with the bulk API ("bulk").
    enqueue: str
    #: A setting better than the peer's defaults (only flask-solidq has such layouts).
    best: bool = False
    #: Threads per worker process, for peers that take it.
    threads: int | None = None


@dataclasses.dataclass
class Scratch:
    """A peer's own empty store for one run, and how to get rid of it."""

    backend: str
    #: The URL the peer's enqueuer and workers connect to.
    url: str
    drop: t.Callable[[], None]


class Peer:
    """One job queue: how to set it up, enqueue into it and start its workers."""

    name: t.ClassVar[str]
    #: The distribution whose version the report prints.
    distribution: t.ClassVar[str]
    backends: t.ClassVar[tuple[str, ...]]
    #: The signal that stops a worker gracefully.
    stop_signal: t.ClassVar[int] = signal.SIGTERM
    #: Whether the peer has a bulk enqueue API.
    has_bulk: t.ClassVar[bool] = True
    #: The settings column of the default layouts.
    default_settings: t.ClassVar[str] = "defaults"

    def layouts(self) -> list[Layout]:
        """One worker process and two, each with the peer's defaults; the first drains a
        backlog enqueued one job at a time, the second one enqueued in bulk."""
        return [
            Layout(1, self.default_settings, "single"),
            Layout(2, self.default_settings, "bulk"),
        ]

    def create(self, backend: str, server_url: str) -> Scratch:
        """An empty store on ``backend`` with the peer's schema."""
        raise NotImplementedError

    def enqueue(self, scratch: Scratch, count: int, bulk: bool) -> float:
        """Enqueue jobs ``0 .. count - 1``; return the seconds the enqueue calls took (the
        client's set-up left out)."""
        raise NotImplementedError

    def commands(self, scratch: Scratch, layout: Layout) -> list[list[str]]:
        """One command line per OS process to start for ``layout``."""
        raise NotImplementedError

    def environment(self, scratch: Scratch) -> dict[str, str]:
        """Variables the worker processes need besides the stamp file's."""
        return {}


def server_scratch(server_url: str) -> tuple[str, t.Callable[[], None]]:
    """A fresh, empty database on the server of ``server_url`` (as the test suite makes them);
    its SQLAlchemy URL and a clean-up that drops it."""
    from tests import support

    url = support.create_scratch_database(server_url)
    return url, lambda: support.drop_scratch_database(url)


def libpq_dsn(url: str) -> str:
    """The ``postgresql://`` form of a SQLAlchemy PostgreSQL URL, for libpq and asyncpg."""
    import sqlalchemy as sa

    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
