"""The app `flask solidq work` runs in the rate-limit process tests:
``flask --app tests.apps.rate_limit_app``.

Environment: ``SOLIDQ_TEST_DATABASE_URL``, the queue's database; ``SOLIDQ_TEST_CONFIG``, a JSON
object merged into ``app.config``.
"""

from __future__ import annotations

import json
import os

from flask import Flask

from tests import support
from tests.jobs import rate_limit_429_process  # noqa: F401 - the 429 process tests'
from tests.jobs import rate_limit_process  # noqa: F401 - the jobs the tests enqueue
from tests.jobs import rate_limit_stacked_process  # noqa: F401 - and the stacked ones


def create_app() -> Flask:
    config = json.loads(os.environ.get("SOLIDQ_TEST_CONFIG") or "{}")
    return support.create_app(os.environ["SOLIDQ_TEST_DATABASE_URL"], **config)
