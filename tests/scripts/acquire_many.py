"""Take admissions from a named budget in a separate process:
``python -m tests.scripts.acquire_many URL COUNT GO_FILE``.

Prints "ready" once the app is up, waits for GO_FILE to exist (so several processes start
together), then takes COUNT admissions one after another from ``nb_test.processes``
(``rate_limiter.acquire``, waiting as long as it takes), noting each in
``solidq_test_acquisitions``, and prints "done".
"""

from __future__ import annotations

import os
import sys
import time

from flask_solidq.timing import utcnow
from tests.jobs import named_budgets as jobs
from tests.support import create_app
from tests.support import solidq


def main(url: str, count: int, go_file: str) -> None:
    app = create_app(url)
    with app.app_context():
        engine = app.extensions["solidq"].engine
        app.extensions["solidq"].check_tables()
        print("ready", flush=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(go_file):
            if time.monotonic() > deadline:
                sys.exit("the go file never appeared")
            time.sleep(0.005)
        for _ in range(count):
            with solidq.rate_limiter.acquire(jobs.PROCESSES, timeout=30) as admission:
                started_at = utcnow()
            with engine.begin() as connection:
                connection.execute(
                    jobs.ACQUISITIONS.insert().values(
                        admitted_at=admission.admitted_at, started_at=started_at, pid=os.getpid()
                    )
                )
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
