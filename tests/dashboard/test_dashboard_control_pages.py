"""The dashboard's pages for what the controls store (:mod:`flask_solidq.dashboard.control_views`),
with the test client on every backend: budgets, coalesce keys, blocked jobs and semaphores,
processes. Each test builds the state through the real enqueue and claim operations, then reads
the page's tables cell by cell.
"""

from __future__ import annotations

import datetime as dt
import html.parser
import re
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.cli import status
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import gcra
from flask_solidq.dashboard import control_views
from flask_solidq.operations import claim
from flask_solidq.reads import control_reads
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import coalesce as coalesce_jobs
from tests.jobs import concurrency as concurrency_jobs
from tests.jobs import rate_limit as rate_limit_jobs

if t.TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
BUDGETS = t.cast(sa.Table, models.RateLimitBudget.__table__)
COALESCE_KEYS = t.cast(sa.Table, models.CoalesceKey.__table__)
SEMAPHORES = t.cast(sa.Table, models.Semaphore.__table__)
PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)
RECURRING_TASKS = t.cast(sa.Table, models.RecurringTask.__table__)
RECURRING_RUNS = t.cast(sa.Table, models.RecurringExecution.__table__)

EVERY_QUEUE = claim.QueueSelector(("*",))
PROCESS_ID = 4545


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    """An app with the dashboard open (testing mode)."""
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


class _Tables(html.parser.HTMLParser):
    """The text of every table cell, table by table, row by row."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(client: FlaskClient, path: str) -> list[list[dict[str, str]]]:
    """GET ``path`` (200 expected) and return its tables as rows keyed by header."""
    response = client.get(path)
    assert response.status_code == 200, response.get_data(as_text=True)
    parser = _Tables()
    parser.feed(response.get_data(as_text=True))
    return [[dict(zip(table[0], row, strict=True)) for row in table[1:]] for table in parser.tables]


def page_text(client: FlaskClient, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200
    return response.get_data(as_text=True)


def later(app: Flask, definition: t.Any, *args: t.Any) -> None:
    with app.app_context():
        definition.perform_later(*args)


def claim_all(engine: sa.Engine) -> claim.ClaimBatch:
    support.register_claimers(engine, [PROCESS_ID])
    return claim.claim_batch(engine, EVERY_QUEUE, 20, PROCESS_ID)


# -- budgets ---------------------------------------------------------------------------------


def test_budgets_shows_each_budget_with_its_limit_admissions_and_waiting_jobs(app, engine, client):
    for index in range(3):
        later(app, rate_limit_jobs.global_job, index)
    later(app, rate_limit_jobs.staggered, "s")
    batch = claim_all(engine)
    assert len(batch.jobs) == 2 and len(batch.deferrals) == 2

    (budgets_table,) = tables(client, "/solidq/budgets")

    rows = {row["Key"]: row for row in budgets_table}
    assert set(rows) == {"rate_test.global/global", "rate_test.staggered/global"}
    spent = rows["rate_test.global/global"]
    assert spent["Limit"] == "1 per 1m00s"
    assert re.fullmatch(
        r"Draining 2 deferred jobs one slot at a time: the next is admitted in .+\.", spent["Now"]
    )
    assert spent["Deferred"] == "2"
    assert spent["Next slot"].startswith("in ")
    fresh = rows["rate_test.staggered/global"]
    # Burst 2, one taken: one more admitted right now.
    assert fresh["Limit"] == "10 per 10s, burst 2"
    assert fresh["Now"] == "Open: admits 1 claim now."
    assert (fresh["Deferred"], fresh["Next slot"]) == ("0", "-")


def test_deferred_jobs_are_listed_apart_from_plain_scheduled_ones(app, engine, client):
    later(app, rate_limit_jobs.global_job, "admitted")
    later(app, rate_limit_jobs.global_job, "deferred")
    with app.app_context():
        plain = rate_limit_jobs.global_job.set(wait=3600).perform_later("planned")
    batch = claim_all(engine)
    (deferred,) = [entry.job.id for entry in batch.deferrals]

    (deferred_list,) = tables(client, "/solidq/jobs?state=deferred")
    (scheduled_list,) = tables(client, "/solidq/jobs?state=scheduled")
    overview, _processes = tables(client, "/solidq/")  # and the claiming process's table

    assert [row["Id"] for row in deferred_list] == [str(deferred)]
    assert deferred_list[0]["Due"].endswith("UTC")
    assert [row["Id"] for row in scheduled_list] == [str(plain.provider_job_id)]
    (queue,) = overview
    assert (queue["Scheduled"], queue["Deferred"]) == ("1", "1")
    assert "<dd>deferred</dd>" in page_text(client, f"/solidq/jobs/{deferred}")
    # `flask solidq status` counts them as the overview does: one scheduled, one deferred.
    with app.app_context(), engine.connect() as connection:
        printed = status.render_status(connection).splitlines()
    counted = dict(zip(printed[1].split()[:8], printed[2].split()[:8], strict=True))
    assert (counted["SCHEDULED"], counted["DEFERRED"]) == ("1", "1")


@pytest.mark.parametrize(
    ("available", "waiting", "due_in", "said"),
    [
        (1, 0, 0, "Open: admits 1 claim now."),
        (3, 0, 0, "Open: admits 3 claims now."),
        (0, 0, 0, "Spent: admits the next claim in 5s."),
        # The case that read as stuck: a free admission beside 30 deferred jobs.
        (
            1,
            30,
            2,
            "Draining 30 deferred jobs one slot at a time: the next is admitted in 2s;"
            " 1 free now for a new claim.",
        ),
        # Spent past the first slot: at its slot it is deferred again; admitted once the
        # budget admits.
        (0, 1, 2, "Draining 1 deferred job one slot at a time: the next is admitted in 5s."),
        (
            1,
            4,
            -1,
            "4 deferred jobs due: each is admitted, or deferred again, when a worker claims it.",
        ),
    ],
)
def test_a_budget_says_what_it_is_doing_in_words(available, waiting, due_in, said):
    now = utcnow()
    outlook = control_reads.BudgetOutlook(
        limit=t.cast(t.Any, None),
        available=available,
        # Free now: a claim now is admitted; spent: the next in 5 s.
        next_admission_at=now + dt.timedelta(seconds=0 if available else 5),
    )
    queued = budgets.Waiting("k", waiting, now + dt.timedelta(seconds=due_in)) if waiting else None

    assert control_views.describe_budget(outlook, queued, now) == said


def test_budgets_says_what_it_cannot_know_for_a_key_no_imported_job_declares(app, engine, client):
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(
            BUDGETS.insert(),
            [{"key": "elsewhere/x", "tat": now, "created_at": now, "updated_at": now}],
        )

    (budgets_table,) = tables(client, "/solidq/budgets")

    assert budgets_table == [
        {
            "Key": "elsewhere/x",
            "Limit": "?",
            "Now": "?",
            "Deferred": "0",
            "Next admission": "?",
            "Next slot": "-",
        }
    ]


def test_budgets_are_paged_by_key(app, engine, client, monkeypatch):
    monkeypatch.setattr(control_views, "PAGE_SIZE", 2)
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(
            BUDGETS.insert(),
            [
                {"key": f"elsewhere/{name}", "tat": now, "created_at": now, "updated_at": now}
                for name in "cab"
            ],
        )

    (first,) = tables(client, "/solidq/budgets")
    (second,) = tables(client, "/solidq/budgets?after=elsewhere/b")

    assert [row["Key"] for row in first] == ["elsewhere/a", "elsewhere/b"]
    assert "after=elsewhere/b" in page_text(client, "/solidq/budgets")
    assert [row["Key"] for row in second] == ["elsewhere/c"]
    assert "Next page" not in page_text(client, "/solidq/budgets?after=elsewhere/b")


def test_budgets_page_without_budgets_says_so_and_refreshes_for_the_first(client):
    text = page_text(client, "/solidq/budgets")

    assert "No budgets" in text
    assert 'hx-trigger="every 3s" data-live' in text  # an empty page can fill


@pytest.mark.parametrize("burst", [1, 2, 5])
def test_admits_available_counts_the_admissions_a_budget_would_grant_now(burst):
    rate = gcra.Rate.of(10, 10, burst)
    now = dt.datetime(2030, 1, 1)
    for tat in (None, now - dt.timedelta(hours=1), now, now + 3 * rate.interval):
        for shift in (dt.timedelta(0), dt.timedelta(microseconds=1), rate.interval / 2):
            budget = gcra.Budget(tat if tat is None else tat + shift)
            expected = 0
            trial = gcra.Budget(budget.tat)
            while expected < burst + 1 and trial.admit(rate, now):
                expected += 1
            assert control_reads.admits_available(budget, rate, now) == expected


# -- coalescing ------------------------------------------------------------------------------


def test_coalescing_shows_each_job_and_its_open_keys_with_their_jobs(app, engine, client):
    later(app, coalesce_jobs.dedupe, 1)
    later(app, coalesce_jobs.dedupe, 1)
    for index in range(4):  # max_calls 3: one sealed job of 3 calls, one open of 1
        later(app, coalesce_jobs.collect, 5, index)
    keys = {row.key: row for row in support.rows(engine, COALESCE_KEYS)}

    summary, open_keys = tables(client, "/solidq/coalescing")

    by_job = {row["Job"]: row for row in summary}
    assert (
        by_job["coalesce_test.dedupe"]["Open keys"],
        by_job["coalesce_test.dedupe"]["Waiting calls"],
    ) == ("1", "0")
    assert by_job["coalesce_test.collect"]["Open keys"] == "1"
    assert by_job["coalesce_test.collect"]["Waiting calls"] == "4"
    assert by_job["coalesce_test.collect"]["Oldest call"].endswith("ago")
    assert sorted(row["Key"] for row in open_keys) == sorted(keys)
    for row in open_keys:
        stored = keys[row["Key"]]
        assert row["Id"] == str(stored.job_id)
        assert row["Collected calls"] == str(stored.calls_count)
    assert {row["Job"]: row["Collected calls"] for row in open_keys}["coalesce_test.collect"] == "1"
    text = page_text(client, "/solidq/coalescing")
    for stored in keys.values():
        assert f'href="/solidq/jobs/{stored.job_id}"' in text


def test_coalescing_open_keys_are_paged_by_row_id(app, engine, client, monkeypatch):
    monkeypatch.setattr(control_views, "PAGE_SIZE", 2)
    for product in (1, 2, 3):
        later(app, coalesce_jobs.dedupe, product)
    ids = sorted(row.id for row in support.rows(engine, COALESCE_KEYS))

    _summary, first = tables(client, "/solidq/coalescing")
    _summary, second = tables(client, f"/solidq/coalescing?after={ids[1]}")

    assert len(first) == 2 and len(second) == 1
    assert {row["Key"] for row in first}.isdisjoint(row["Key"] for row in second)
    assert f"after={ids[1]}" in page_text(client, "/solidq/coalescing")


def test_coalescing_without_keys_says_so_and_refreshes_for_the_first(client):
    text = page_text(client, "/solidq/coalescing")

    assert "No open keys." in text
    assert 'hx-trigger="every 3s" data-live' in text  # an empty page can fill


# -- blocked ---------------------------------------------------------------------------------


def test_blocked_shows_blocked_jobs_per_key_with_the_semaphore_and_every_semaphore(
    app, engine, client
):
    later(app, concurrency_jobs.limited, "acct")
    later(app, concurrency_jobs.limited, "acct")
    later(app, concurrency_jobs.limited, "acct")
    later(app, concurrency_jobs.limited_two, "free")
    key = "concurrency_test.limited/acct"

    blocked, semaphores = tables(client, "/solidq/concurrency")

    assert len(blocked) == 1
    (row,) = blocked
    assert (row["Concurrency key"], row["Blocked jobs"], row["Free slots"]) == (key, "2", "0")
    assert row["Held by (running)"] == "none running"  # the holder is ready, not claimed
    assert row["Oldest"].endswith("ago")
    assert row["Lease"].startswith("in ")
    stored = {entry.key: entry.value for entry in support.rows(engine, SEMAPHORES)}
    assert {entry["Key"]: entry["Free slots"] for entry in semaphores} == {
        name: str(value) for name, value in stored.items()
    }
    assert stored[key] == 0 and len(stored) == 2

    (holder,) = [job.id for job in claim_all(engine).jobs if job.concurrency_key == key]
    blocked, _semaphores = tables(client, "/solidq/concurrency")
    assert blocked[0]["Held by (running)"] == str(holder)


def test_blocked_keys_and_semaphores_are_paged_apart(app, engine, client, monkeypatch):
    monkeypatch.setattr(control_views, "PAGE_SIZE", 1)
    for account in ("a", "b"):
        later(app, concurrency_jobs.limited, account)
        later(app, concurrency_jobs.limited, account)
    first_key, second_key = "concurrency_test.limited/a", "concurrency_test.limited/b"

    blocked, semaphores = tables(client, "/solidq/concurrency")
    blocked_next, semaphores_same = tables(client, f"/solidq/concurrency?after={first_key}")
    _blocked, semaphores_next = tables(client, f"/solidq/concurrency?semaphores_after={first_key}")

    assert [row["Concurrency key"] for row in blocked] == [first_key]
    assert [row["Concurrency key"] for row in blocked_next] == [second_key]
    assert [row["Key"] for row in semaphores] == [row["Key"] for row in semaphores_same]
    assert [row["Key"] for row in semaphores] == [first_key]
    assert [row["Key"] for row in semaphores_next] == [second_key]


def test_blocked_without_blocked_jobs_says_so_and_refreshes_for_the_first(client):
    text = page_text(client, "/solidq/concurrency")

    assert "No blocked jobs." in text and "No semaphores." in text
    assert 'hx-trigger="every 3s" data-live' in text  # an empty page can fill


def test_the_blocked_jobs_and_the_concurrency_keys_are_two_pages_of_two_names(client):
    blocked = page_text(client, "/solidq/jobs?state=blocked")
    keys = page_text(client, "/solidq/concurrency")

    assert "<title>Blocked jobs · flask-solidq</title>" in blocked
    assert "<h1>Blocked jobs</h1>" in blocked
    assert "<title>Concurrency keys · flask-solidq</title>" in keys
    assert "<h1>Concurrency keys</h1>" in keys
    assert "Blocked jobs</h1>" not in keys
    # The nav names each page once; the states list is the nav's, not repeated on the page.
    assert blocked.count('href="/solidq/jobs?state=ready"') == 1
    assert 'href="/solidq/jobs?state=blocked" aria-current="page"' in blocked
    assert ">Concurrency</a>" in blocked and ">Semaphores</a>" not in blocked


# -- processes -------------------------------------------------------------------------------


def test_processes_shows_each_process_and_marks_a_silent_one(app, engine, client):
    now = utcnow()
    silent_since = now - dt.timedelta(hours=1)
    with engine.begin() as connection:
        connection.execute(
            PROCESSES.insert(),
            [
                {
                    "kind": "Worker",
                    "name": "worker-<1>",
                    "pid": 11,
                    "hostname": "box-1",
                    "last_heartbeat_at": now,
                    "created_at": now,
                },
                {
                    "kind": "Dispatcher",
                    "name": "dispatcher-1",
                    "pid": 12,
                    "hostname": None,
                    "last_heartbeat_at": silent_since,
                    "created_at": now,
                },
            ],
        )

    (processes,) = tables(client, "/solidq/processes")

    assert [(row["Kind"], row["Name"], row["Host"], row["Pid"]) for row in processes] == [
        ("Worker", "worker-<1>", "box-1", "11"),
        ("Dispatcher", "dispatcher-1", "-", "12"),
    ]
    assert processes[0]["Heartbeat"].endswith("ago")
    assert "presumed dead" not in processes[0]["Heartbeat"]
    assert processes[1]["Heartbeat"] == "1h00m ago silent: presumed dead"
    # Names are escaped.
    assert "worker-&lt;1&gt;" in page_text(client, "/solidq/processes")


def test_processes_are_paged_by_row_id(app, engine, client, monkeypatch):
    monkeypatch.setattr(control_views, "PAGE_SIZE", 1)
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(
            PROCESSES.insert(),
            [
                {"kind": "Worker", "name": f"w{n}", "pid": n, "last_heartbeat_at": now}
                for n in (1, 2)
            ],
        )
    first_id = min(row.id for row in support.rows(engine, PROCESSES))

    (first,) = tables(client, "/solidq/processes")
    (second,) = tables(client, f"/solidq/processes?after={first_id}")

    assert [row["Name"] for row in first] == ["w1"]
    assert [row["Name"] for row in second] == ["w2"]


def test_the_pages_are_closed_like_the_rest_of_the_dashboard(app, client):
    app.testing = False

    for path in (
        "/solidq/budgets",
        "/solidq/coalescing",
        "/solidq/concurrency",
        "/solidq/processes",
        "/solidq/recurring",
    ):
        assert client.get(path).status_code == 403


# -- recurring -------------------------------------------------------------------------------


def test_recurring_shows_each_task_with_its_last_and_next_run(app, engine, client):
    later(app, rate_limit_jobs.unlimited, "tick")
    (job,) = support.rows(engine, JOBS)
    now = utcnow()
    last_run = (now - dt.timedelta(minutes=3)).replace(second=0, microsecond=0)
    with engine.begin() as connection:
        connection.execute(
            RECURRING_TASKS.insert(),
            [
                {
                    "key": key,
                    "schedule": schedule,
                    "class_name": "rate_test.unlimited",
                    "static": True,
                    "description": "<nightly>",
                    "created_at": now,
                    "updated_at": now,
                }
                for key, schedule in (("cleanup", "every minute"), ("odd", "not a schedule"))
            ],
        )
        connection.execute(
            RECURRING_RUNS.insert(),
            [{"job_id": job.id, "task_key": "cleanup", "run_at": last_run, "created_at": now}],
        )

    (recurring,) = tables(client, "/solidq/recurring")

    cleanup, odd = recurring
    assert cleanup["Key"] == "cleanup<nightly>"  # the description on its own line
    assert (cleanup["Job"], cleanup["Schedule"]) == ("rate_test.unlimited", "every minute")
    assert cleanup["Last run"].startswith(f"{last_run:%Y-%m-%d %H:%M:%S} UTC (")
    assert cleanup["Next run"].endswith(")") and " UTC (in " in cleanup["Next run"]
    assert (odd["Last run"], odd["Next run"]) == ("never", "?")
    assert "&lt;nightly&gt;" in page_text(client, "/solidq/recurring")


def test_recurring_without_tasks_says_so_and_refreshes_for_the_first(client):
    text = page_text(client, "/solidq/recurring")

    assert "No recurring tasks" in text
    assert 'hx-trigger="every 3s" data-live' in text  # an empty page can fill


# -- overview's throughput chart -------------------------------------------------------------


def test_the_overview_charts_the_jobs_finished_per_minute_of_the_last_hour(app, engine, client):
    now = utcnow()
    # 3 jobs finished half a minute ago, 1 five minutes ago, 2 at 59 min 30 s ago, and 4 an
    # hour and a half ago (outside the chart).
    ages = [0.5] * 3 + [5.5] + [59.5] * 2 + [90] * 4
    with engine.begin() as connection:
        connection.execute(
            JOBS.insert(),
            [
                {
                    "queue_name": "charted",
                    "class_name": "dashboard_test.done",
                    "arguments": "{}",
                    "priority": 0,
                    "active_job_id": None,
                    "scheduled_at": now - dt.timedelta(minutes=age),
                    "finished_at": now - dt.timedelta(minutes=age),
                    "created_at": now - dt.timedelta(minutes=age),
                    "updated_at": now,
                }
                for age in ages
            ],
        )

    page = page_text(client, "/solidq/")
    (overview,) = tables(client, "/solidq/")

    assert overview[0]["Finished (last hour)"] == "6"
    assert "Jobs finished per minute, last hour: 6 in all, at most 3 in a minute" in page
    bars = re.findall(r"<title>\d\d:\d\d UTC: (\d+) finished</title>", page)
    assert bars == ["2", "1", "3"]  # oldest minute first; empty minutes have no bar
