"""Every process the test suite starts, and its end however the suite ends.

:func:`start` (and :func:`run`, for ``subprocess.run``) is how a test starts a process (a
test checks that no other test calls ``subprocess`` itself). Each child runs in a session of
its own (so a terminal's Ctrl-C doesn't reach it behind the fixtures' backs, and its whole
group, forked workers included, can be ended at once) and carries :data:`MARKER` in its environment,
a value naming this pytest process and the child, which everything it starts inherits.
:func:`end` ends a child: its group, then any marked process that left the group or outlived
its leader.

What ends them when the test's own ``end`` doesn't run:

- at exit, on SIGTERM and on SIGINT (:func:`install`, from ``conftest.py``), every child still
  registered is ended, before SIGTERM kills pytest and before SIGINT raises KeyboardInterrupt;
- on Linux, each child gets SIGKILL when pytest dies (``PR_SET_PDEATHSIG``), and a guardian
  process, started with the first child, waits for pytest to close its pipe (at whatever death,
  SIGKILL included) and then kills every process carrying this pytest's marker: the children's
  children too, which no death signal reaches;
- an xdist worker gets SIGTERM when the pytest that started it dies.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import pathlib
import secrets
import signal
import subprocess
import sys
import threading
import time
import types
import typing as t

#: The environment variable every started process, and every process it starts, carries.
MARKER = "SOLIDQ_TEST_PROCESS"

#: How long :func:`end` waits for the marked processes it killed to be gone, in seconds.
END_TIMEOUT = 10.0

PR_SET_PDEATHSIG = 1
PROC = pathlib.Path("/proc")
LINUX = sys.platform == "linux"

#: The pytest process this module was imported in (a forked child sees its parent's pid).
OWNER_PID = os.getpid()
#: This pytest process's part of every marker: its pid, and a nonce against pid reuse.
OWNER = f"{OWNER_PID}-{secrets.token_hex(4)}"

Handler = t.Callable[[int, types.FrameType | None], object] | int | None

_started: dict[subprocess.Popen[t.Any], str] = {}
_numbers = itertools.count(1)
_previous: dict[int, Handler] = {}
_installed: list[bool] = []
_guardian: list[int] = []  # the write end of the guardian's pipe, once started
_prctl = ctypes.CDLL(None, use_errno=True).prctl if LINUX else None

#: The guardian: waits for its stdin to close, then kills every process whose environment
#: holds the entry given as its argument, until none is left (or 30 s have passed).
GUARDIAN = """
import os, signal, sys, time
sys.stdin.buffer.read()
entry = sys.argv[1].encode()
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                entries = environ.read().split(b"\\0")
        except (OSError, ValueError):
            continue
        if any(line.startswith(entry) for line in entries) and int(name) != os.getpid():
            found.append(int(name))
    if not found:
        break
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.05)
"""


def start(
    args: t.Sequence[str],
    *,
    env: t.Mapping[str, str] | None = None,
    preexec_fn: t.Callable[[], object] | None = None,
    **options: t.Any,
) -> subprocess.Popen[t.Any]:
    """``subprocess.Popen(args, ...)`` in a session of its own, marked and registered, ended
    by :func:`end` (or, if the test doesn't, at pytest's exit or death)."""
    marker = f"{OWNER}/{next(_numbers)}"
    environment = {**(os.environ if env is None else env), MARKER: marker}
    _start_guardian()
    process = subprocess.Popen(
        args,
        env=environment,
        start_new_session=True,
        preexec_fn=_child_setup(preexec_fn),
        **options,
    )
    _started[process] = marker
    return process


def end(process: subprocess.Popen[t.Any], timeout: float = END_TIMEOUT) -> None:
    """SIGKILL ``process``'s group and every process carrying its marker; reap it."""
    marker = _started.pop(process, None)
    _kill_group(process)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    if marker is not None:
        _kill_marked(f"{MARKER}={marker}".encode(), timeout=timeout)


@contextlib.contextmanager
def started(args: t.Sequence[str], **options: t.Any) -> t.Iterator[subprocess.Popen[t.Any]]:
    """:func:`start`, then :func:`end` when the block is left, however."""
    process = start(args, **options)
    try:
        yield process
    finally:
        end(process)


def run(
    args: t.Sequence[str], *, timeout: float, input: str | bytes | None = None, **options: t.Any
) -> subprocess.CompletedProcess[t.Any]:
    """``subprocess.run``, through :func:`start`: ``check`` and ``capture_output`` work as
    there; whatever happens, the process and its group are ended before this returns."""
    check = options.pop("check", False)
    if options.pop("capture_output", False):
        options.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        options["stdin"] = subprocess.PIPE
    with started(args, **options) as process:
        stdout, stderr = process.communicate(input, timeout=timeout)
        returncode = process.wait()
    result = subprocess.CompletedProcess(args, returncode, stdout, stderr)
    if check:
        result.check_returncode()
    return result


def end_all() -> None:
    """Kill every registered process's group and marked descendants, without waiting for
    anything or reaping (safe in a signal handler that interrupted a ``wait``)."""
    if os.getpid() != OWNER_PID:
        return  # a forked child of pytest: its parent's processes aren't its to end
    for process in list(_started):
        _kill_group(process, reap=False)
    _kill_marked(f"{MARKER}={OWNER}/".encode(), prefix=True, timeout=0)


def install(*, xdist_worker: bool = False) -> None:
    """End every registered process at exit, on SIGTERM and on SIGINT; in an xdist worker,
    ask for SIGTERM when the pytest that started it dies. From the main thread."""
    if _installed:
        return
    _installed.append(True)
    atexit.register(end_all)
    for signum in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(signum) is not signal.SIG_IGN:  # ignored, as in a background job
            _previous[signum] = signal.signal(signum, _on_signal)
    if xdist_worker:
        _die_with_parent(signal.SIGTERM)


def processes_with(entry: bytes, *, prefix: bool = False) -> list[int]:
    """The running processes (zombies aside: they have no environment left) whose
    environment holds ``entry`` (``b"NAME=value"``), or with ``prefix`` an entry starting
    with it."""
    found = []
    for pid in _pids():
        environment = _environment(pid)
        if any(line.startswith(entry) if prefix else line == entry for line in environment):
            found.append(pid)
    return found


def _pids() -> list[int]:
    return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]


def _environment(pid: int) -> list[bytes]:
    try:
        return (PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:  # gone meanwhile, or not ours to read
        return []


def _kill_group(process: subprocess.Popen[t.Any], *, reap: bool = True) -> None:
    # Only while the leader isn't reaped: its pid, and so its group's id, can't be reused.
    alive = process.poll() is None if reap else process.returncode is None
    if alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def _kill_marked(entry: bytes, *, prefix: bool = False, timeout: float) -> None:
    """SIGKILL the processes carrying ``entry`` until none is left, for up to ``timeout``."""
    if not LINUX:
        return
    deadline = time.monotonic() + timeout
    while found := [pid for pid in processes_with(entry, prefix=prefix) if pid != os.getpid()]:
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() >= deadline:
            return
        time.sleep(0.01)


def _on_signal(signum: int, frame: types.FrameType | None) -> None:
    end_all()
    previous = _previous.get(signum)
    if callable(previous):  # SIGINT's: raise KeyboardInterrupt
        previous(signum, frame)
        return
    # SIGTERM's default: die of it, as pytest would have.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _child_setup(then: t.Callable[[], object] | None) -> t.Callable[[], None]:
    """What a child runs between fork and exec: SIGKILL when pytest dies (Linux), then
    ``then``. Only for children of the main thread: the death signal follows the thread
    that forked, and a test's helper thread may end before its child should."""
    parent = os.getpid()
    on_main_thread = threading.current_thread() is threading.main_thread()

    def setup() -> None:
        if on_main_thread:
            _die_with_parent(signal.SIGKILL, parent)
        if then is not None:
            then()

    return setup


def _die_with_parent(signum: int, parent: int | None = None) -> None:
    """Get ``signum`` when the parent dies; die now if it already has."""
    if _prctl is None:
        return
    expected = os.getppid() if parent is None else parent
    _prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    if os.getppid() != expected:
        os.kill(os.getpid(), signum)


def _start_guardian() -> None:
    """Start the guardian once per pytest process (Linux), on its stdin the read end of a
    pipe only this process writes to, which the kernel closes whenever this process ends.
    Spawned, not a Popen: it outlives pytest, which never waits for it."""
    if _guardian or not LINUX or os.getpid() != OWNER_PID:
        return
    read_end, write_end = os.pipe()
    environment = {name: value for name, value in os.environ.items() if name != MARKER}
    try:
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-I", "-S", "-c", GUARDIAN, f"{MARKER}={OWNER}/"],
            environment,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, read_end, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
        )
    finally:
        os.close(read_end)
    _guardian.append(write_end)


def _after_fork_in_child() -> None:
    """A forked child of pytest (a test's ``os.fork``, multiprocessing's fork) holds none of
    pytest's processes and must not keep the guardian waiting."""
    _started.clear()
    while _guardian:
        with contextlib.suppress(OSError):
            os.close(_guardian.pop())


os.register_at_fork(after_in_child=_after_fork_in_child)
