"""The transitions are the only writers of a job's state: its row and its executions.

Read from the package's source, so a new path that writes a job's state somewhere else, or
ends a job without the hooks every end runs, fails here before it can forget a batch's
count, an attempt or a concurrency slot."""

from __future__ import annotations

import inspect
import pathlib
import re

import pytest

import flask_solidq
from flask_solidq.operations import job_ends

PACKAGE = pathlib.Path(flask_solidq.__file__).parent
TABLES = {
    "JOBS": "solidq_jobs",
    "READY": "solidq_ready_executions",
    "SCHEDULED": "solidq_scheduled_executions",
    "CLAIMED": "solidq_claimed_executions",
    "BLOCKED": "solidq_blocked_executions",
    "FAILED": "solidq_failed_executions",
}
#: Outside transitions/, the modules that write those tables anyway, each with why: the
#: dialects' fast paths, which write the same rows as the transitions in one statement (and
#: only the callers named in :data:`FAST_PATHS` run them).
ALSO_WRITING = {
    "storage/dialects/postgresql.py": "the fast paths' statements on PostgreSQL",
    "storage/dialects/postgresql_bulk.py": "the bulk enqueue's statements on PostgreSQL",
    "storage/dialects/driver.py": "the fast paths' statements on SQLite and MySQL",
    "storage/dialects/driver_writes.py": "the single enqueue on the driver",
}
#: The dialects' writing fast paths, and who may run them.
FAST_PATHS = {
    "insert_with_execution": {"operations/enqueue.py"},
    "insert_pipelined": {"operations/enqueue.py"},
    "insert_all_autocommitted": {"operations/enqueue.py"},
    "insert_all": {"operations/enqueue.py"},
    "claim_in_one_statement": {"operations/claim.py"},
    "finish_held": {"transitions/ends.py"},
}


def sources() -> dict[str, str]:
    return {
        str(path.relative_to(PACKAGE)): path.read_text("utf-8") for path in PACKAGE.rglob("*.py")
    }


def writing(pattern: str) -> set[str]:
    return {name for name, text in sources().items() if re.search(pattern, text)}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_only_the_transitions_write_a_jobs_row_and_executions(table):
    core = rf"\b{table}\.(insert|update|delete)\(|sa\.(insert|update|delete)\({table}\b"
    by_id = rf"delete_by_ids\([^)]*\b{table}\b"
    text = rf"(?i)\b(insert\s+into|update|delete\s+from)\s+{TABLES[table]}\b"
    writers = writing(core) | writing(by_id) | writing(text)
    outside = {name for name in writers if not name.startswith("transitions/")}
    assert outside <= set(ALSO_WRITING), outside - set(ALSO_WRITING)


def test_only_the_batches_package_writes_a_batchs_counts():
    assert writing(r"\bBATCHES\.update\(") == {"batches/counts.py", "batches/blocks.py"}


@pytest.mark.parametrize("method", sorted(FAST_PATHS))
def test_the_dialects_writing_fast_paths_have_the_callers_named(method):
    callers = {
        name
        for name in writing(rf"\bdialect(\([^)]*\))?\.{method}\(")
        if not name.startswith("storage/")  # the dialects themselves, and db's forwarding
    }
    assert callers == FAST_PATHS[method]


def test_only_job_ends_ends_a_job_and_runs_the_finish_hooks():
    """The end writers (transitions/ends.py) and the controls' FINISH hooks each have one
    caller, job_ends, which runs every end's hooks in one order."""
    assert writing(r"transitions import ends\b|transitions\.ends\b") == {"operations/job_ends.py"}
    assert writing(r"\bcontrols\.finish\(") == {"operations/job_ends.py"}


def test_every_end_runs_its_hooks_in_the_declared_order():
    """attempts, then the coalesce key, then the batch's counts, in the transaction."""
    fail = inspect.getsource(job_ends._fail)
    assert fail.index("ends.fail(") < fail.index("attempts.record(") < fail.index("COALESCE_KEYS")
    for name in ("store_outcomes", "fail", "discard", "hold_back", "reopen"):
        assert "_count(" in inspect.getsource(getattr(job_ends, name)), name
    assert "after_commit_on" in inspect.getsource(job_ends.let_go)
