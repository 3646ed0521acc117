"""A TCP proxy that breaks the path to a database on demand, for the fault-injection tests.

``FaultProxy(host, port)`` listens on 127.0.0.1 (or ``listen_host``) on an ephemeral port and
forwards every connection to ``host:port``; :meth:`FaultProxy.url` rewrites a database URL to
go through it.
:meth:`FaultProxy.set_mode` switches what the path does, for every connection, open or new:

``pass``
    forward both ways (the healthy path);
``reset``
    close every open connection with a TCP RST (``SO_LINGER`` 0) on both sides, and reset
    each new one at once (a database restart, a firewall dropping state);
``blackhole``
    forward nothing either way but keep every socket open: bytes wait in the proxy and the
    kernels' buffers, and flow again on heal, like packets retransmitted once a dropped path
    comes back. (The proxy's kernel still acknowledges what it receives, so the clients'
    TCP keepalives see a healthy peer: only timeouts above TCP notice this blackhole.)
``half-cut``
    forward client to server only: requests reach the database and run, their replies wait
    (a one-way drop). A reset after a half-cut loses those replies: a statement that
    committed on the server while its client saw an error.

One thread runs the whole proxy (a ``select`` loop); :meth:`FaultProxy.close` stops it and
closes every socket, and it stops by itself after ``lifetime`` seconds whatever happens.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
import typing as t

import sqlalchemy as sa

PASS = "pass"
RESET = "reset"
BLACKHOLE = "blackhole"
HALF_CUT = "half-cut"
MODES = (PASS, RESET, BLACKHOLE, HALF_CUT)

#: The most bytes held per direction of a connection before the proxy stops reading it.
BUFFER_LIMIT = 1 << 20
#: How often the loop looks at its mode and its deadline when nothing moves, in seconds.
TICK = 0.02


def reset_close(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP RST instead of a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Pair:
    """One proxied connection: the client's socket, the server's, and the bytes between."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.to_server = bytearray()
        self.to_client = bytearray()
        #: A side closed: send what is held to the other, then close it.
        self.closing = False

    def sockets(self) -> tuple[socket.socket, socket.socket]:
        return self.client, self.server


class FaultProxy:
    """A fault-injecting TCP proxy to ``target_host:target_port`` (see the module)."""

    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        lifetime: float = 300.0,
        listen_host: str = "127.0.0.1",
    ) -> None:
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self._listener = socket.create_server((listen_host, 0), backlog=128)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._deadline = time.monotonic() + lifetime
        self._mode = PASS
        self._applied = threading.Event()
        self._applied.set()
        self._reset_pending = False
        self._closed = False
        self._pairs: list[_Pair] = []
        #: Counters: connections accepted, and connections reset by the proxy.
        self.accepted = 0
        self.resets = 0
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()

    @classmethod
    def for_url(cls, database_url: str, **options: t.Any) -> FaultProxy:
        """A proxy to the server of ``database_url``."""
        url = sa.make_url(database_url)
        default_port = 5432 if url.get_backend_name() == "postgresql" else 3306
        return cls(url.host or "127.0.0.1", url.port or default_port, **options)

    def url(self, database_url: str) -> str:
        """``database_url`` going through the proxy."""
        url = sa.make_url(database_url).set(host=self.listen_host, port=self.port)
        return url.render_as_string(hide_password=False)

    @property
    def mode(self) -> str:
        return self._mode

    def set_mode(self, mode: str, timeout: float = 5.0) -> None:
        """Switch to ``mode``; return once the proxy's loop acts on it (a ``reset`` has reset
        every open connection)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {MODES}")
        self._applied.clear()
        self._mode = mode
        if mode == RESET:
            self._reset_pending = True
        if not self._applied.wait(timeout):
            raise AssertionError(f"the fault proxy didn't switch to {mode} in {timeout}s")

    def close(self) -> None:
        """Stop the loop and close every socket (waits for the loop's thread)."""
        self._closed = True
        self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # The loop.

    def _run(self) -> None:
        try:
            while not self._closed and time.monotonic() < self._deadline:
                self._step()
        finally:
            with contextlib.suppress(OSError):
                self._listener.close()
            for pair in self._pairs:
                for sock in pair.sockets():
                    with contextlib.suppress(OSError):
                        sock.close()
            self._pairs = []
            self._applied.set()

    def _step(self) -> None:
        mode = self._mode
        if self._reset_pending:
            self._reset_pending = False
            for pair in self._pairs:
                self._reset(pair)
            self._pairs = []
        self._applied.set()
        readers: list[socket.socket] = [self._listener]
        writers: list[socket.socket] = []
        for pair in self._pairs:
            forward_up = mode in (PASS, HALF_CUT)
            forward_down = mode == PASS
            if forward_up and not pair.closing and len(pair.to_server) < BUFFER_LIMIT:
                readers.append(pair.client)
            if forward_down and not pair.closing and len(pair.to_client) < BUFFER_LIMIT:
                readers.append(pair.server)
            if forward_up and pair.to_server:
                writers.append(pair.server)
            if forward_down and pair.to_client:
                writers.append(pair.client)
        try:
            readable, writable, _ = select.select(readers, writers, [], TICK)
        except (OSError, ValueError):  # a socket closed under us: look again
            self._pairs = [pair for pair in self._pairs if pair.client.fileno() >= 0]
            return
        for sock in readable:
            if sock is self._listener:
                self._accept(mode)
        for pair in list(self._pairs):
            try:
                self._move(pair, readable, writable)
            except OSError:
                self._reset(pair)
                self._pairs.remove(pair)
                continue
            if pair.closing and not pair.to_server and not pair.to_client:
                for sock in pair.sockets():
                    with contextlib.suppress(OSError):
                        sock.close()
                self._pairs.remove(pair)

    def _accept(self, mode: str) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        self.accepted += 1
        if mode == RESET:
            self.resets += 1
            reset_close(client)
            return
        try:
            server = socket.create_connection(self.target, timeout=5)
        except OSError:
            reset_close(client)
            return
        for sock in (client, server):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._pairs.append(_Pair(client, server))

    def _move(
        self, pair: _Pair, readable: list[socket.socket], writable: list[socket.socket]
    ) -> None:
        if pair.client in readable:
            data = pair.client.recv(65536)
            if data:
                pair.to_server += data
            else:
                pair.closing = True
        if pair.server in readable:
            data = pair.server.recv(65536)
            if data:
                pair.to_client += data
            else:
                pair.closing = True
        if pair.server in writable and pair.to_server:
            sent = pair.server.send(pair.to_server)
            del pair.to_server[:sent]
        if pair.client in writable and pair.to_client:
            sent = pair.client.send(pair.to_client)
            del pair.to_client[:sent]

    def _reset(self, pair: _Pair) -> None:
        self.resets += 1
        for sock in pair.sockets():
            reset_close(sock)
