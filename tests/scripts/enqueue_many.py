"""Enqueue jobs from a separate process: ``python -m tests.scripts.enqueue_many URL COUNT GO_FILE``.

Prints "ready" once the app is up, waits for GO_FILE to exist (so several processes start
enqueuing together), then enqueues COUNT jobs one by one and prints "done".
"""

from __future__ import annotations

import os
import sys
import time

from tests.jobs import basic as jobs
from tests.support import create_app


def main(url: str, count: int, go_file: str) -> None:
    app = create_app(url)
    with app.app_context():
        app.extensions["solidq"].check_tables()
        print("ready", flush=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(go_file):
            if time.monotonic() > deadline:
                sys.exit("the go file never appeared")
            time.sleep(0.005)
        for index in range(count):
            jobs.store_result.perform_later(index)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
