"""The app `flask solidq work` runs in the process test of
:mod:`tests.controls.rate_limit.test_seams_rate_limit`: ``flask --app
tests.apps.seams_rate_limit_app``.

Environment: ``SOLIDQ_TEST_DATABASE_URL``, the queue's database; ``SOLIDQ_TEST_CONFIG``, a JSON
object merged into ``app.config``.
"""

from __future__ import annotations

import json
import os

from flask import Flask

from tests import support
from tests.jobs import seams_rate_limit  # noqa: F401 - the jobs the tests enqueue


def create_app() -> Flask:
    config = json.loads(os.environ.get("SOLIDQ_TEST_CONFIG") or "{}")
    return support.create_app(os.environ["SOLIDQ_TEST_DATABASE_URL"], **config)
