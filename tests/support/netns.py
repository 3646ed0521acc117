"""A second host on this machine, for the dead-path test: a Linux network namespace joined to
this one by a veth pair, whose link the test can take down and bring back.

Taking the link down drops every packet either way without a FIN or an RST, as a dead cable,
a rebooting switch or a NAT that forgot the connection does. (A proxy cannot do that: its
kernel acknowledges what it receives, so the client's TCP believes the path is alive.)

Needs root and iproute2's ``ip`` (CI runs as root); :func:`available` says whether this
machine can. Each :class:`IsolatedHost` has names and a /30 subnet of its own derived from the
test process's pid, and removes all of it on exit, also when the test fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import typing as t


def available() -> str | None:
    """``None`` if network namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


class IsolatedHost:
    """A network namespace behind a veth link: run a command in it with :attr:`exec_prefix`;
    it reaches this host at :attr:`gateway`."""

    def __init__(self) -> None:
        tag = os.getpid() % 100_000
        self.namespace = f"solidq-dead-{tag}"
        self._outer = f"sqo{tag}"  # interface names: 15 characters at most
        self._inner = f"sqi{tag}"
        subnet = f"10.213.{tag % 250}"
        #: This host's address on the link: what a process in the namespace connects to.
        self.gateway = f"{subnet}.1"
        self._inner_address = f"{subnet}.2"

    @property
    def exec_prefix(self) -> list[str]:
        """The command line prefix that runs a command inside the namespace."""
        return ["ip", "netns", "exec", self.namespace]

    def link_down(self) -> None:
        """Drop every packet between the namespace and this host, silently."""
        _ip("link", "set", self._outer, "down")

    def link_up(self) -> None:
        _ip("link", "set", self._outer, "up")

    def __enter__(self) -> IsolatedHost:
        self._remove()  # leftovers of a run that was killed before its clean-up
        _ip("netns", "add", self.namespace)
        try:
            _ip("link", "add", self._outer, "type", "veth", "peer", "name", self._inner)
            _ip("link", "set", self._inner, "netns", self.namespace)
            _ip("addr", "add", f"{self.gateway}/30", "dev", self._outer)
            _ip("link", "set", self._outer, "up")
            inside = ["netns", "exec", self.namespace, "ip"]
            _ip(*inside, "addr", "add", f"{self._inner_address}/30", "dev", self._inner)
            _ip(*inside, "link", "set", self._inner, "up")
            _ip(*inside, "link", "set", "lo", "up")
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, *exc_info: t.Any) -> None:
        self._remove()

    def _remove(self) -> None:
        # Deleting one end of a veth pair deletes both; deleting the namespace kills nothing
        # (the test has killed its processes before).
        for command in (["link", "del", self._outer], ["netns", "del", self.namespace]):
            subprocess.run(["ip", *command], capture_output=True, timeout=30)
