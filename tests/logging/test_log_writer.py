"""The line writer behind ``flask solidq work``'s stderr handler: every line written whole and
in order, from any number of threads; WARNING lines and flushes written before they return;
a fork writes the pending lines first and happens with no writer thread running; and the
handler built on it writes what logging.shutdown leaves pending before a process exits."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import pytest

from flask_solidq.logging import formats
from flask_solidq.logging import line_writer
from tests.support import processes


@pytest.fixture
def pipe():
    read, write = os.pipe()
    os.set_blocking(read, False)
    yield read, write
    for descriptor in (read, write):
        try:
            os.close(descriptor)
        except OSError:
            pass


def read_available(descriptor: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(descriptor, 65536)
        except BlockingIOError:
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def read_until(descriptor: int, lines: int, timeout: float = 10.0) -> list[bytes]:
    """The lines read from ``descriptor`` once ``lines`` arrived (fails past ``timeout``)."""
    data = b""
    deadline = time.monotonic() + timeout
    while data.count(b"\n") < lines:
        arrived = data.count(b"\n")
        assert time.monotonic() < deadline, f"{arrived} of {lines} lines arrived"
        data += read_available(descriptor)
        time.sleep(0.001)
    return data.splitlines()


def test_lines_from_many_threads_arrive_whole_and_in_each_thread_s_order(pipe):
    read, write = pipe
    writer = line_writer.LineWriter(write)
    drained: list[bytes] = []
    reader_done = threading.Event()

    def reader() -> None:  # keep the pipe from filling while the threads write
        drained.extend(read_until(read, 3 * 2000, timeout=30))
        reader_done.set()

    reading = threading.Thread(target=reader)
    reading.start()

    def lines(thread: int) -> None:
        for number in range(2000):
            writer.write(f"thread {thread} line {number:04d} {'x' * 60}\n".encode())

    threads = [threading.Thread(target=lines, args=(index,)) for index in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert reader_done.wait(30)
    reading.join()
    writer.close()

    assert len(drained) == 6000
    for thread in range(3):
        own = [line for line in drained if line.startswith(f"thread {thread} ".encode())]
        assert own == [
            f"thread {thread} line {number:04d} {'x' * 60}".encode() for number in range(2000)
        ]


def test_a_line_written_now_and_a_flush_are_on_the_descriptor_when_they_return(pipe):
    read, write = pipe
    writer = line_writer.LineWriter(write)
    writer.linger = 60.0  # would hold a lingering line back for a minute

    writer.write(b"soon\n")
    writer.write(b"now\n", now=True)
    assert read_available(read) == b"soon\nnow\n"  # in order: the pending line first

    writer.write(b"pending\n")
    writer.flush()
    assert read_available(read) == b"pending\n"
    writer.close()


def test_past_the_most_pending_lines_the_logging_thread_writes_them_itself(pipe, monkeypatch):
    read, write = pipe
    monkeypatch.setattr(line_writer, "MAX_PENDING", 3)
    writer = line_writer.LineWriter(write)
    writer.linger = 60.0  # the writer's thread holds its lines for a minute
    writer.write(b"one\n")
    writer.write(b"two\n")
    assert read_available(read) == b""
    writer.write(b"three\n")  # the third: written before write() returns
    assert read_available(read) == b"one\ntwo\nthree\n"
    writer.close()


@pytest.mark.filterwarnings("error::DeprecationWarning")  # 3.12+: a fork with threads running
def test_a_fork_writes_the_pending_lines_first_and_starts_with_no_writer_thread(pipe):
    read, write = pipe
    writer = line_writer.LineWriter(write)
    writer.linger = 60.0  # the parent's line would wait a minute but for the fork
    writer.write(b"parent\n")
    assert writer._thread is not None
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            writer.write(b"child\n", now=True)
            code = 0
        finally:
            os._exit(code)
    # The supervisor forks with no thread of its own running: the writer's ended first.
    assert writer._thread is None
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert read_until(read, 2) == [b"parent", b"child"]  # written once, by the parent, first
    writer.close()
    assert read_available(read) == b""


def test_the_work_handler_writes_its_lines_before_the_process_exits(tmp_path):
    program = (
        "import logging\n"
        "from flask_solidq.logging import formats\n"
        "logger = logging.getLogger('flask_solidq')\n"
        "formats.configure(logger, level=None, log_format=None)\n"
        "for number in range(500):\n"
        "    logger.info('line %s', number)\n"
        "logger.warning('the last')\n"
    )
    result = processes.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    lines = result.stderr.splitlines()
    assert [line.split(" ", 3)[3] for line in lines] == [
        *(f"line {number}" for number in range(500)),
        "the last",
    ]
    assert all(" INFO " in line for line in lines[:-1]) and " WARNING " in lines[-1]


def test_the_work_handler_writes_to_a_stream_without_a_descriptor_under_its_lock():
    import io

    logger = logging.getLogger("solidq_log_writer_test")
    stream = io.StringIO()
    saved = sys.stderr
    sys.stderr = stream
    try:
        formats.configure(logger, level=None, log_format=formats.LogFormat.TEXT)
    finally:
        sys.stderr = saved
    try:
        (handler,) = logger.handlers
        assert getattr(handler, "writer", "missing") is None
        logger.info("captured")
        assert stream.getvalue().endswith(" INFO captured\n")
    finally:
        for handler in logger.handlers:
            handler.close()
        logger.handlers.clear()
        logger.propagate = True


def test_the_work_handler_asks_its_filters_and_formats_without_a_formatter(pipe):
    """The handler skips ``filter`` and ``Handler.format`` only when that changes nothing: a
    filter it was given still drops and (Python 3.12+) replaces records, and without a
    formatter it formats as ``logging.Handler`` does."""
    read, write = pipe
    logger = logging.getLogger("solidq_log_writer_filters")
    saved, stream = sys.stderr, os.fdopen(write, "w", closefd=False)
    sys.stderr = stream
    try:
        formats.configure(logger, level=formats.LogLevel.INFO, log_format=formats.LogFormat.TEXT)
    finally:
        sys.stderr = saved
    (handler,) = logger.handlers
    try:
        handler.addFilter(lambda record: "drop" not in record.getMessage())
        logger.info("kept")
        logger.info("drop this")
        handler.filters.clear()
        handler.setFormatter(None)  # type: ignore[arg-type]
        logger.warning("unformatted")
        assert [line.split(b" ", 3)[-1] for line in read_until(read, 2)] == [
            b"kept",
            b"unformatted",
        ]
    finally:
        handler.close()
        logger.handlers.clear()
        logger.propagate = True
