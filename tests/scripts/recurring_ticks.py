"""Enqueue recurring ticks from a separate process:
``python -m tests.scripts.recurring_ticks URL GO_FILE FIRST_RUN_AT COUNT``.

Prints "ready" once the app is up, waits for GO_FILE to exist (so several processes race for
the same ticks), then calls ``enqueue_tick`` for COUNT ticks a minute apart from FIRST_RUN_AT
(ISO 8601) and prints "enqueued <jobs it won> errors <error log records>".
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import time

from flask_solidq.config import RecurringSettings
from flask_solidq.recurring import tasks
from tests.support import create_app

#: The task every racer enqueues: the scripts and the test that starts them must agree on it.
RACE = RecurringSettings(
    key="recurring_test.race",
    job="tests.jobs.basic:store_result",
    schedule="every minute",
    args=("tick",),
)


def race_ticks(first_run_at: dt.datetime, count: int) -> list[dt.datetime]:
    """The ``count`` ticks of :data:`RACE` from ``first_run_at`` on."""
    return [first_run_at + dt.timedelta(minutes=index) for index in range(count)]


class ErrorCount(logging.Handler):
    """Counts the error records of the scheduler's logger: enqueue_tick logs, never raises."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def main(url: str, go_file: str, first_run_at: str, count: int) -> None:
    errors = ErrorCount()
    logging.getLogger("flask_solidq.scheduler").addHandler(errors)
    app = create_app(url)
    task = tasks.RecurringTask.from_settings(RACE)
    with app.app_context():
        engine = app.extensions["solidq"].engine
        app.extensions["solidq"].check_tables()
        print("ready", flush=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(go_file):
            if time.monotonic() > deadline:
                sys.exit("the go file never appeared")
            time.sleep(0.005)
        won = [
            tasks.enqueue_tick(engine, task, run_at)
            for run_at in race_ticks(dt.datetime.fromisoformat(first_run_at), count)
        ]
    print(f"enqueued {sum(job is not None for job in won)} errors {errors.count}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
