"""The app of the ``flask solidq work --once`` tests: ``flask --app tests.apps.once_app``.

Environment: as :mod:`tests.apps.worker_app`'s.
"""

from __future__ import annotations

import json
import os

from flask import Flask

from tests import support
from tests.jobs import once  # noqa: F401 - the jobs the tests enqueue
from tests.jobs import worker  # noqa: F401 - and the runtime tests' own


def create_app() -> Flask:
    config = json.loads(os.environ.get("SOLIDQ_TEST_CONFIG") or "{}")
    return support.create_app(os.environ["SOLIDQ_TEST_DATABASE_URL"], **config)
