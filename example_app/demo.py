"""Run the example app's web server and its worker together: ``make demo`` (``make demo
PORT=5001`` for another port), or ``python -m example_app.demo --port 5001``.

The port is taken first: one in use says so in one line and exits 1 before anything else
starts, so no worker is left behind. Then the SQLite database is migrated and, the first time,
seeded with a few jobs in every state (:mod:`example_app.seed`; ``--seed``/``--no-seed``
decide, and by default only the demo's own database, not one of ``DATABASE_URL``, is seeded).
``flask solidq work`` starts as a child, and this process serves the app (Werkzeug's
development server, as ``flask run`` does). Ctrl-C or TERM stops both: the worker, in a session
of its own so the terminal's Ctrl-C doesn't reach it twice, gets one interrupt and shuts down
gracefully while this process waits; a second Ctrl-C is passed on to it as well. A worker
that stops by itself stops the demo, which then exits 1.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import types
import typing as t

from werkzeug.serving import BaseWSGIServer
from werkzeug.serving import WSGIRequestHandler
from werkzeug.serving import make_server

from example_app import seed
from example_app.app import create_app

FLASK = [sys.executable, "-m", "flask", "--app", "example_app.app:create_app"]

#: What stops the demo besides Ctrl-C: ``kill``, and the terminal closing (the worker, in a
#: session of its own, would not hear of it).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: How long the worker may take to shut down gracefully before it is killed.
WORKER_STOP_TIMEOUT = 15


class PortUnavailable(Exception):
    """The port can't be listened on; the message is the one line the demo prints."""


def main(argv: list[str] | None = None) -> int:
    options = _parse(argv)
    try:
        listener = _listen(options.host, options.port)
    except PortUnavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    with listener:
        subprocess.run([*FLASK, "db", "upgrade"], check=True)
        app = create_app()
        if _seeds(options):
            with app.app_context():
                print(seed.describe(seed.seed()), file=sys.stderr)
        server = make_server(
            options.host,
            options.port,
            app,
            threaded=True,
            request_handler=QuietPollHandler,
            fd=listener.fileno(),
        )
    return _serve(server)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m example_app.demo", description="Serve the example app with its worker."
    )
    parser.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1")
    parser.add_argument("--port", type=_port, default=5000, help="default: 5000")
    parser.add_argument(
        "--seed",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="enqueue a few jobs in every state if the database has none yet"
        " (default: only for the demo's own database, not one of DATABASE_URL)",
    )
    return parser.parse_args(argv)


def _seeds(options: argparse.Namespace) -> bool:
    """Whether to seed: as asked, or else only the demo's own SQLite database, since a
    ``DATABASE_URL`` may be a database of yours (or a test's, counting its own jobs)."""
    if options.seed is not None:
        return bool(options.seed)
    return "DATABASE_URL" not in os.environ


def _port(value: str) -> int:
    port = int(value)
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (1 to 65535)")
    return port


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, taken before anything else starts.

    :raises PortUnavailable: the port is in use, or can't be listened on.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortUnavailable(
                f"Port {port} is in use on {host}: stop what uses it, or pick another port"
                f" (make demo PORT={port + 1 if port < 65535 else 5001})."
            ) from None
        raise PortUnavailable(f"Can't listen on {host}:{port}: {exc.strerror or exc}.") from None


def _serve(server: BaseWSGIServer) -> int:
    """Serve until an interrupt or until the worker stops; stop both either way."""
    worker = subprocess.Popen([*FLASK, "solidq", "work"], start_new_session=True)
    serving = threading.Thread(target=server.serve_forever, name="demo-server")
    # Ctrl-C too, explicitly: a demo started from a script or a CI job may inherit SIGINT
    # ignored, and Python then never turns it into KeyboardInterrupt.
    for signum in STOP_SIGNALS:
        signal.signal(signum, _interrupt)
    try:
        serving.start()
        server.log_startup()
        worker.wait()
        print("The worker stopped, so the demo stops too.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        for signum in STOP_SIGNALS:  # until _stop passes them on
            signal.signal(signum, signal.SIG_IGN)
        if serving.is_alive():
            server.shutdown()
            serving.join()
        _stop(worker)


def _interrupt(signum: int, frame: types.FrameType | None) -> t.NoReturn:
    raise KeyboardInterrupt


def _stop(worker: subprocess.Popen[bytes]) -> None:
    """Interrupt the worker once and wait for its graceful shutdown; pass a second Ctrl-C on to
    it (which stops it at once); kill it, with the processes it forked, if it outlasts
    WORKER_STOP_TIMEOUT."""

    def forward(signum: int, frame: types.FrameType | None) -> None:
        if worker.poll() is None:
            worker.send_signal(signal.SIGINT)

    for signum in STOP_SIGNALS:
        signal.signal(signum, forward)
    if worker.poll() is None:
        worker.send_signal(signal.SIGINT)
    try:
        worker.wait(WORKER_STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)  # its session's group: the forked children too
        worker.wait()


class QuietPollHandler(WSGIRequestHandler):
    """Werkzeug's request log, without the page's own poll every 2 s."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if self.headers.get("HX-Request") == "true" and str(code) == "200":
            return
        super().log_request(code, size)


if __name__ == "__main__":
    sys.exit(main())
