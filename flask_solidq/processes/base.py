"""What every flask-solidq process shares: registration in ``solidq_processes``, heartbeats,
and a life of boot, run, shut down.

A process (a runner: worker, dispatcher or scheduler) runs in the thread that calls
:meth:`Runnable.run` (the main thread of a forked child, or a thread of the supervisor in thread
mode). Its row says it is alive: it heartbeats every ``SOLIDQ_PROCESS_HEARTBEAT_INTERVAL``; a
heartbeat that finds the row gone means another supervisor pruned it, and the process stops.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
import typing as t

import sqlalchemy as sa

from flask_solidq import db
from flask_solidq import models
from flask_solidq.processes.outage import Outage
from flask_solidq.processes.waker import Waker
from flask_solidq.processes.waker import Watched
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.state import SolidQState

logger = logging.getLogger("flask_solidq")

PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)


class Runnable:
    """A registered process with a stop flag and a wake-up.

    Subclasses say what ``kind`` they are, what ``metadata`` they register with, and what
    they do in :meth:`loop`; :meth:`boot` and :meth:`shutdown` may add to the life around it.
    """

    kind: t.ClassVar[str] = "Process"

    def __init__(self, app: Flask, *, supervisor_id: int | None = None) -> None:
        self.app = app
        self.state: SolidQState = app.extensions["solidq"]
        self.supervisor_id = supervisor_id
        self.name = f"{self.kind.split('(')[0].lower()}-{secrets.token_hex(10)}"
        self.process_id: int | None = None
        self.pid = os.getpid()
        # A plain flag and a pipe, not Events: stop() runs in signal handlers (see waker.py).
        self._stopping = False
        self._waker = Waker()
        self._heartbeat_stopped = threading.Event()
        self._heartbeat: threading.Thread | None = None
        #: The database outage this process is living through, logged once (outage.py).
        self.outage = Outage(f"{self.kind} {self.name}")

    @property
    def engine(self) -> sa.Engine:
        return self.state.engine

    @property
    def settings(self) -> t.Any:
        return self.state.settings

    @property
    def metadata(self) -> dict[str, t.Any]:
        """What the process registers about itself (queues, threads, intervals...)."""
        return {}

    @property
    def stopping(self) -> bool:
        return self._stopping

    def run(self) -> None:
        """Boot, run the loop until stopped, shut down; in the calling thread."""
        with self.app.app_context():
            self.boot()
            try:
                self.loop()
            finally:
                self.shutdown()

    def stop(self) -> None:
        """Ask the process to stop after its current step (any thread, or a signal handler)."""
        self._stopping = True
        self.wake_up()

    def wake_up(self) -> None:
        """End the current sleep at once (any thread, or a signal handler)."""
        self._waker.ring()

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``, ending early when woken or stopped."""
        if not self.stopping:
            self._waker.sleep(seconds, self.watched())

    def watched(self) -> list[Watched]:
        """Descriptors that bring wake-ups from other processes, to wait on while asleep."""
        return []

    def loop(self) -> None:
        raise NotImplementedError

    def boot(self) -> None:
        """Register, start heartbeating, say so in the log."""
        self.pid = os.getpid()
        self.register()
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name=f"{self.name}-heartbeat", daemon=True
        )
        self._heartbeat.start()
        logger.info(
            "SolidQ started %s %s (pid %s) %s",
            self.kind,
            self.name,
            self.pid,
            _describe(self.metadata),
        )

    def shutdown(self) -> None:
        """Stop heartbeating and deregister: the process heartbeats until then, so a worker
        draining its jobs for the whole shutdown timeout isn't pruned as dead meanwhile."""
        self._stopping = True
        self._heartbeat_stopped.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
        self.deregister()
        self._waker.close()
        logger.info("SolidQ stopped %s %s (pid %s)", self.kind, self.name, self.pid)

    def register(self) -> None:
        """Insert the process's row."""
        now = utcnow()
        row = {
            "kind": self.kind,
            "last_heartbeat_at": now,
            "supervisor_id": self.supervisor_id,
            "pid": self.pid,
            "hostname": socket.gethostname(),
            "metadata": json.dumps(self.metadata),
            "name": self.name,
            "created_at": now,
        }
        with db.write(self.engine) as connection:
            self.process_id = db.insert_returning_id(connection, PROCESSES.insert(), row)

    def deregister(self) -> None:
        """Delete the process's row, if it still exists."""
        if self.process_id is None:
            return
        try:
            with db.write(self.engine) as connection:
                connection.execute(PROCESSES.delete().where(PROCESSES.c.id == self.process_id))
        except sa.exc.SQLAlchemyError:
            logger.warning("SolidQ couldn't deregister %s %s", self.kind, self.name, exc_info=True)

    def heartbeat(self) -> bool:
        """Touch the process's row; return False when it's gone (pruned by someone else)."""
        with db.write(self.engine) as connection:
            result = connection.execute(
                PROCESSES.update()
                .where(PROCESSES.c.id == self.process_id)
                .values(last_heartbeat_at=utcnow())
            )
        return bool(result.rowcount)

    def _heartbeat_loop(self) -> None:
        interval = self.settings.process_heartbeat_interval
        while not self._heartbeat_stopped.wait(interval):
            started = time.monotonic()
            try:
                alive = self.heartbeat()
            except sa.exc.SQLAlchemyError as error:
                if not self.outage.failed(error, started=started, retry_every=interval):
                    logger.warning(
                        "SolidQ heartbeat of %s failed; trying again", self.name, exc_info=True
                    )
                continue
            self.outage.succeeded()
            if not alive:
                logger.warning(
                    "SolidQ %s %s was pruned by another process; stopping", self.kind, self.name
                )
                self.process_id = None
                self.stop()
                return


def _describe(metadata: dict[str, t.Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in metadata.items())
