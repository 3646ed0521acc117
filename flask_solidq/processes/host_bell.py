"""Wake-ups between the processes of one machine that share a queue database.

Each worker and dispatcher binds a Unix datagram socket in a directory of its own database's
(under the temporary directory, readable by this user only); a process that made jobs ready,
or scheduled one, sends a datagram to every socket of the kind that should hear it. Sending
costs a directory listing and one ``sendto`` per listener, takes no lock and never blocks; a
listener that is gone leaves a socket nobody reads, which the next sender removes. It works on
every database and needs no server feature, so it is how SQLite and MySQL processes (and
PostgreSQL processes on one machine, for enqueues) hear each other at once instead of at their
next poll.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import functools
import hashlib
import logging
import os
import secrets
import socket
import tempfile
import typing as t

if t.TYPE_CHECKING:
    import sqlalchemy as sa

logger = logging.getLogger("flask_solidq")

#: Who listens: workers hear that jobs are ready, dispatchers that a job was scheduled.
WORKER = "worker"
DISPATCHER = "dispatcher"

#: The longest path a Unix socket can have (Linux's sun_path, less its terminator).
_MAX_PATH = 107

#: What separates a socket's name from its tag (base64 never holds a dot).
TAG_MARK = "."


class HostBell:
    """The sockets of one queue database on this machine."""

    def __init__(self, url: sa.URL) -> None:
        self.directory = _directory(url)

    def listen(self, kind: str, tag: str = "") -> Listener | None:
        """Bind a socket that hears the datagrams sent to ``kind``; None when this machine
        can't have one (no Unix sockets, a path too long, a directory not ours).

        ``tag`` (a worker's queues) goes into the socket's name, when it fits, so a sender can
        pass this listener over (see :meth:`ring`); one that doesn't fit is left out, and the
        listener hears every ring of its kind.
        """
        name = f"{kind}-{os.getpid()}-{secrets.token_hex(4)}"
        path = os.path.join(self.directory, f"{name}.sock")
        if len(path) > _MAX_PATH or not hasattr(socket, "AF_UNIX"):
            return None
        tagged = os.path.join(self.directory, f"{name}{TAG_MARK}{_encode_tag(tag)}.sock")
        if tag and len(tagged) <= _MAX_PATH:
            path = tagged
        try:
            sock = _bound_socket(self.directory, path)
        except OSError as error:
            logger.info("SolidQ wakes by polling only: no socket in %s (%s)", self.directory, error)
            return None
        return Listener(sock, path)

    def may_have_listeners(self) -> bool:
        """Whether a process of this machine may listen: the database's directory exists (it
        goes with its last socket). One ``access`` call, a third of the cost of listing a
        directory that isn't there and raising nothing: every enqueue on a machine without
        workers (a web host) asks, and a worker that starts later makes the directory, so the
        next enqueue rings it."""
        return os.access(self.directory, os.F_OK)

    def ring(
        self, kind: str, message: bytes = b"", *, only: t.Callable[[str], bool] | None = None
    ) -> None:
        """Send ``message`` to every socket of ``kind`` (of those with a tag, only to those
        whose tag ``only`` accepts); never raises, never blocks."""
        try:
            with os.scandir(self.directory) as entries:
                targets = [entry.path for entry in entries if _hears(entry.name, f"{kind}-", only)]
        except OSError:
            return
        if not targets:  # a web process on a machine without workers: no socket to make
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            for path in targets:
                _send(sender, path, message)


class Listener:
    """A bound socket: a file descriptor to wait on, and the messages that arrived."""

    def __init__(self, sock: socket.socket, path: str) -> None:
        self.socket = sock
        self.path = path

    def fileno(self) -> int:
        return self.socket.fileno()

    def drain(self) -> list[bytes]:
        """Every datagram waiting, oldest first."""
        messages = []
        while True:
            try:
                messages.append(self.socket.recv(256))
            except (BlockingIOError, OSError):
                return messages

    def close(self) -> None:
        """Stop listening; the database's directory goes with its last socket."""
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.path))
        self.socket.close()


def _encode_tag(tag: str) -> str:
    return base64.urlsafe_b64encode(tag.encode()).decode().rstrip("=")


def _hears(filename: str, prefix: str, only: t.Callable[[str], bool] | None) -> bool:
    """Whether the socket ``filename`` is of the kind ``prefix`` names and, if it has a tag,
    one that ``only`` accepts."""
    if not filename.startswith(prefix):
        return False
    tag = _tag_of(filename)
    return only is None or tag is None or only(tag)


@functools.lru_cache(maxsize=1024)
def _tag_of(filename: str) -> str | None:
    """The tag in a socket's file name; None for a socket without one (or an unreadable
    one: such a listener hears everything)."""
    stem = filename.removesuffix(".sock")
    if TAG_MARK not in stem:
        return None
    encoded = stem.split(TAG_MARK, 1)[1]
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def _bound_socket(directory: str, path: str) -> socket.socket:
    """A non-blocking datagram socket bound at ``path``; tried twice, in case the last
    listener of the directory removed it between our making it and binding."""
    for attempt in (1, 2):
        _make_private_directory(directory)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            sock.bind(path)
            return sock
        except FileNotFoundError:
            sock.close()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _send(sender: socket.socket, path: str, message: bytes) -> None:
    try:
        sender.sendto(message, path)
    except (ConnectionRefusedError, FileNotFoundError):
        # Nobody reads it any more (its process died without closing it): tidy up, the
        # directory too if it was the last (as Listener.close does), so that senders skip
        # the listing (see HostBell.may_have_listeners).
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(path))
    except OSError as error:
        # EAGAIN: its buffer is full, so it has wake-ups waiting already.
        if error.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS):
            logger.debug("SolidQ couldn't wake %s: %s", path, error)


def _directory(url: sa.URL) -> str:
    """One directory per database (the URL without its password; SQLite's path made
    absolute), under a directory of this user's."""
    if url.drivername.startswith("sqlite") and url.database:
        url = url.set(database=os.path.abspath(url.database))
    name = hashlib.sha256(url.render_as_string(hide_password=True).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"flask-solidq-{os.getuid()}", name)


def _make_private_directory(path: str) -> None:
    for directory in (os.path.dirname(path), path):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
        status = os.stat(directory)
        if status.st_uid != os.getuid() or status.st_mode & 0o077:
            raise PermissionError(f"{directory} is not private to this user")
