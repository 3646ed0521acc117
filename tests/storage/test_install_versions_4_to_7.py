"""Schema versions 4 (attempt history, start times), 5 (the budgets' admissions), 6 (a job's
charges, a budget's back-off) and 7 (a batch's parent) on an app that has version 3's tables:
`flask solidq install` writes those four revisions (and the later ones), `flask db upgrade`
adds them keeping the jobs (a job finished before has no start time and no charges), and
`flask db downgrade` takes them off again.
On SQLite always, PostgreSQL and MySQL/MariaDB when their URLs are set (as test_install.py).
"""

from __future__ import annotations

import datetime as dt
import pathlib

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.storage.install import schema_versions
from tests.storage.test_install import LATER_THAN_VERSION_3
from tests.storage.test_install import Databases
from tests.storage.test_install import FlaskCLI
from tests.storage.test_install import chain_after
from tests.storage.test_install import copy_migrations
from tests.storage.test_install import databases  # noqa: F401 - a fixture
from tests.storage.test_install import initialized  # noqa: F401 - a fixture
from tests.storage.test_install import module_variable
from tests.storage.test_install import named
from tests.storage.test_install import schema_differences

JOBS = models.JobRecord.__table__
FAILURES = models.JobFailure.__table__
BATCHES = models.BatchRecord.__table__


@pytest.mark.processes
def test_an_app_on_schema_version_3_gets_only_versions_4_to_7_and_keeps_its_jobs(
    databases: Databases,  # noqa: F811
    initialized: dict[str, pathlib.Path],  # noqa: F811
    tmp_path: pathlib.Path,
) -> None:
    url = databases.new()
    engine = databases.engine(url)
    flask = FlaskCLI(tmp_path, "single_db", SOLIDQ_TEST_DATABASE_URL=url)
    copy_migrations(initialized["single"], tmp_path)

    # What a release with schema versions 1 to 3 wrote and ran.
    flask("solidq", "install")
    for path in flask.revisions().values():
        if module_variable(path, "solidq_schema_version") > 3:
            path.unlink()
    assert len(flask.revisions()) == 3
    flask("db", "upgrade")
    assert named(schema_differences(engine)) == sorted(LATER_THAN_VERSION_3)
    (third,) = [
        path
        for path in flask.revisions().values()
        if module_variable(path, "solidq_schema_version") == 3
    ]
    moment = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    with engine.begin() as connection:
        job_id = connection.execute(
            JOBS.insert().values(
                queue_name="default",
                class_name="c",
                priority=0,
                finished_at=moment,
                created_at=moment,
                updated_at=moment,
            )
        ).inserted_primary_key[0]

    result = flask("solidq", "install")

    fourth, fifth, sixth, seventh, *later = chain_after(flask, module_variable(third, "revision"))
    assert module_variable(fourth, "solidq_schema_version") == 4
    assert module_variable(fifth, "solidq_schema_version") == 5
    assert module_variable(sixth, "solidq_schema_version") == 6
    assert module_variable(seventh, "solidq_schema_version") == 7
    assert [module_variable(path, "solidq_schema_version") for path in later] == [
        version.number for version in schema_versions()[7:]
    ]
    assert fourth.name.endswith("_add_solidq_job_failures.py")
    assert fifth.name.endswith("_add_solidq_rate_limits_admissions.py")
    assert sixth.name.endswith("_add_solidq_rate_limit_charges_and_back_offs.py")
    assert seventh.name.endswith("_add_solidq_batch_parents.py")
    assert all(path.name in result.stdout for path in (fourth, fifth, sixth, seventh))
    flask("db", "upgrade")
    assert schema_differences(engine) == []
    with engine.begin() as connection:
        row = connection.execute(sa.select(JOBS).where(JOBS.c.id == job_id)).one()
        assert (row.finished_at, row.started_at, row.rate_limit_charges) == (moment, None, None)
        empty = dict.fromkeys(("total_jobs", "pending_jobs", "completed_jobs", "failed_jobs"), 0)
        row = {**empty, "created_at": moment, "updated_at": moment}
        parent = connection.execute(BATCHES.insert().values(row)).inserted_primary_key[0]
        connection.execute(BATCHES.insert().values({**row, "parent_id": parent}))
        connection.execute(
            FAILURES.insert().values(job_id=job_id, executions=1, error="{}", created_at=moment)
        )

    flask("db", "downgrade", module_variable(third, "revision"))
    assert named(schema_differences(engine)) == sorted(LATER_THAN_VERSION_3)
    with engine.connect() as connection:
        assert connection.execute(sa.select(JOBS.c.id)).scalars().all() == [job_id]
