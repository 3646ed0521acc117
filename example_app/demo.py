"""Run the example app's web server and its worker together: ``make demo``.

Migrates the SQLite database, then starts ``flask run`` and ``flask solidq work`` side by side.
Ctrl-C stops both (the terminal sends it to all three processes; this one then waits for the
other two to finish their graceful shutdown).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

FLASK = [sys.executable, "-m", "flask", "--app", "example_app.app:create_app"]


def main() -> int:
    subprocess.run([*FLASK, "db", "upgrade"], check=True)
    processes = [
        subprocess.Popen([*FLASK, "run", *sys.argv[1:]]),
        subprocess.Popen([*FLASK, "solidq", "work"]),
    ]
    try:
        while all(process.poll() is None for process in processes):
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C mustn't cut the wait short
        _stop(processes)
    return 0


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + 15
    for process in processes:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    os.environ.setdefault("FLASK_DEBUG", "0")
    sys.exit(main())
