"""The example app: migrates with its own history, enqueues from its page, and the demo's seed
puts jobs in every state."""

from __future__ import annotations

import contextlib
import json
import logging

import flask_migrate
import sqlalchemy as sa

from example_app import demo
from example_app import seed
from example_app.app import HTMX_SCRIPT
from example_app.app import PARTNER_BUDGET
from example_app.app import create_app
from example_app.extensions import solidq
from example_app.models import Product
from flask_solidq import models
from flask_solidq.operations import claim
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.operations.outcomes import OutcomeKind
from tests import support


@contextlib.contextmanager
def loggers_kept_enabled():
    """Alembic's env.py runs logging.config.fileConfig, which disables every logger that
    exists; put them back so later tests still see their logs."""
    enabled = [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger) and not logger.disabled
    ]
    try:
        yield
    finally:
        for logger in enabled:
            logger.disabled = False


def test_the_example_app_migrates_and_enqueues_from_its_page(tmp_path):
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/demo.db"})
    with app.app_context(), loggers_kept_enabled():
        flask_migrate.upgrade()
    client = app.test_client()

    response = client.post("/products", data={"name": "Teapot"}, follow_redirects=True)
    assert response.status_code == 200
    assert b"Teapot" in response.data
    # The product's reindex is still pending: reindexing again coalesces into it.
    again = client.post("/products/1/reindex", data={"wait": "30"}, follow_redirects=True)
    assert b"already has a pending reindex" in again.data
    client.post("/contacts/sync", data={"count": "25"})

    with app.app_context():
        engine = app.extensions["solidq"].engine
        with engine.connect() as connection:
            names = connection.scalars(sa.select(models.JobRecord.__table__.c.class_name)).all()
            scheduled = connection.scalar(
                sa.select(sa.func.count()).select_from(models.ScheduledExecution.__table__)
            )
        engine.dispose()
    assert names.count("reindex_product") == 1
    assert names.count("SyncContactJob") == 25
    assert scheduled == 0
    page = client.get("/").get_data(as_text=True)
    assert "<strong>26</strong> ready" in page
    assert "<strong>0</strong> scheduled" in page


def test_the_partner_button_enqueues_rate_limited_jobs_and_the_page_shows_their_budget(tmp_path):
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/demo.db"})
    with app.app_context(), loggers_kept_enabled():
        flask_migrate.upgrade()
    client = app.test_client()
    assert PARTNER_BUDGET == "notify_partner_api/global"

    page = client.get("/").get_data(as_text=True)
    assert "Notify the partner of 20 orders" in page
    assert "5 times in any 10 s" in page
    assert "(burst 2)" in page
    assert "<code>notify_partner_api/global</code>" in page
    assert "<strong>0</strong> waiting" in page
    assert "next admission <strong>now</strong>" in page

    response = client.post("/partners/notify", data={"count": "20"}, follow_redirects=True)
    assert response.status_code == 200
    flashed = response.get_data(as_text=True)
    assert "Queued 20 partner notifications" in flashed
    assert "lets 2 run at once, then one every 2.5 s" in flashed

    # A worker's claim, as `flask solidq work` would make it: the quiet budget admits the
    # burst, and the other 18 wait as deferred jobs, one slot 2.5 s after another.
    with app.app_context():
        engine = app.extensions["solidq"].engine
        support.register_claimers(engine, [9001])
        claimed = claim.claim(engine, claim.QueueSelector(("partners",)), 20, process_id=9001)
        with engine.connect() as connection:
            keys = connection.scalars(sa.select(models.JobRecord.__table__.c.rate_limit_key)).all()
        state = solidq.rate_limiter.state(PARTNER_BUDGET)
        wait = solidq.rate_limiter.time_until_available(PARTNER_BUDGET)
        engine.dispose()
    assert len(claimed) == 2
    assert keys == ["notify_partner_api/global"] * 20
    assert state.waiting == 18
    assert state.limited
    assert 0 < wait <= 2.5

    page = client.get("/").get_data(as_text=True)
    assert "<strong>18</strong> waiting" in page
    assert "next admission <strong>in " in page
    assert "next waiting job checked in " in page
    assert "<strong>18</strong> deferred" in page
    assert "<strong>0</strong> scheduled" in page
    assert "<strong>2</strong> claimed" in page
    assert page.count("<td>deferred</td>") == 18


def test_the_example_app_answers_bad_input_with_4xx_and_enqueues_nothing(tmp_path):
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/demo.db"})
    with app.app_context(), loggers_kept_enabled():
        flask_migrate.upgrade()
    client = app.test_client()

    missing = client.post("/products/99999/reindex", data={"wait": "30"})
    assert missing.status_code == 404
    assert b"There is no product 99999." in missing.data
    client.post("/products", data={"name": "Teapot"})
    answers = {
        ("/products/1/reindex", "wait", "soon"): b"wait must be a whole number, not &#39;soon",
        ("/products/1/reindex", "wait", "-5"): b"wait must be between 0 and 86400, not -5.",
        ("/contacts/sync", "count", "100000000"): b"count must be between 1 and 1000",
        ("/contacts/sync", "count", "0"): b"count must be between 1 and 1000, not 0.",
        ("/catalog/import", "suppliers", "3.5"): b"suppliers must be a whole number",
        ("/partners/notify", "count", "201"): b"count must be between 1 and 200, not 201.",
    }
    for (path, name, value), message in answers.items():
        response = client.post(path, data={name: value})
        assert (response.status_code, message in response.data) == (400, True), (path, value)

    with app.app_context():
        engine = app.extensions["solidq"].engine
        with engine.connect() as connection:
            names = connection.scalars(sa.select(models.JobRecord.__table__.c.class_name)).all()
        engine.dispose()
    assert names == ["reindex_product"]  # the new product's own


def test_the_catalog_button_runs_a_batch_whose_imports_add_reindexes_then_publish_once(tmp_path):
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/demo.db"})
    with app.app_context(), loggers_kept_enabled():
        flask_migrate.upgrade()
    client = app.test_client()
    for name in ("Teapot", "Kettle"):
        client.post("/products", data={"name": name})
    assert "No import yet." in client.get("/").get_data(as_text=True)

    response = client.post("/catalog/import", data={"suppliers": "3"}, follow_redirects=True)
    assert "Catalog import: batch 1 of 3 supplier imports" in response.get_data(as_text=True)

    # A worker, as `flask solidq work` runs one: claim, perform, store, until nothing is left.
    with app.app_context():
        engine = app.extensions["solidq"].engine
        support.register_claimers(engine, [9002])
        selector = claim.QueueSelector(("*",))
        while claimed := claim.claim(engine, selector, 10, process_id=9002):
            outcomes = [execute.perform(job) for job in claimed]
            finalize.finalize_all(engine, 9002, outcomes, preserve_finished=True)
        batch = solidq.batches.find(1)
        with engine.connect() as connection:
            jobs = models.JobRecord.__table__
            published = connection.scalar(
                sa.select(sa.func.count()).where(jobs.c.class_name == "publish_catalog")
            )
        engine.dispose()
    # 3 imports, and one reindex per product in the batch: the first import opened them, the
    # others joined them while they were pending.
    assert (batch.status.value, batch.total_jobs, batch.completed_jobs) == ("completed", 5, 5)
    assert published == 1
    page = client.get("/").get_data(as_text=True)
    assert "<td>published</td>" in page
    assert "<td>5 / 5</td>" in page


def test_the_page_polls_its_changing_regions_with_the_vendored_htmx(tmp_path):
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/demo.db"})
    with app.app_context(), loggers_kept_enabled():
        flask_migrate.upgrade()
    client = app.test_client()

    page = client.get("/")
    html = page.get_data(as_text=True)
    assert 'hx-get="/" hx-trigger="every 2s" hx-swap="none"' in html
    script_url = f"/solidq-static/{HTMX_SCRIPT}"
    assert f'<script src="{script_url}" defer></script>' in html
    assert "HX-Request" in page.headers["Vary"]

    script = client.get(script_url)
    assert script.status_code == 200
    assert script.mimetype in ("text/javascript", "application/javascript")
    assert b"htmx" in script.data[:100]
    script.close()
    licence = client.get(script_url.replace(".min.js", ".LICENSE.txt"))
    assert licence.status_code == 200
    licence.close()

    client.post("/products", data={"name": "Teapot"})
    polled = client.get("/", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "<html" not in polled
    for region in ("counts", "products", "budget", "recent"):
        assert f'id="{region}" hx-swap-oob="true"' in polled, region
        assert f'id="{region}"' in html, region  # the full page has each region to swap into
    assert "<strong>1</strong> ready" in polled
    assert "Teapot" in polled


def test_the_demos_dashboard_is_open_to_this_machine_only(tmp_path):
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/demo.db"})
    with app.app_context(), loggers_kept_enabled():
        flask_migrate.upgrade()
    client = app.test_client()

    assert b'href="/solidq/"' in client.get("/").data
    assert client.get("/solidq/").status_code == 200
    elsewhere = client.get("/solidq/", environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert elsewhere.status_code == 403
    with app.app_context():
        app.extensions["solidq"].engine.dispose()


def seeded_app(tmp_path):
    """The example app on a migrated SQLite database of its own, seeded as the demo seeds it."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/demo.db"})
    with app.app_context(), loggers_kept_enabled():
        flask_migrate.upgrade()
    with app.app_context():
        assert seed.seed() == {
            "reindexes": 3,
            "contact syncs": 5,
            "CRM exports": 2,
            "cart reminders": 3,
            "partner notifications": 16,
            "report rebuilds": 3,
            "digest calls": 4,
            "supplier imports in a batch": 3,
            "search rebuild in steps": 1,
        }
    return app


def state_counts(engine) -> dict[str, int]:
    """How many jobs each execution table holds, and how many jobs finished."""
    tables = {
        "ready": models.ReadyExecution,
        "scheduled": models.ScheduledExecution,
        "claimed": models.ClaimedExecution,
        "blocked": models.BlockedExecution,
        "failed": models.FailedExecution,
    }
    with engine.connect() as connection:
        counts = {
            state: connection.scalar(sa.select(sa.func.count()).select_from(model.__table__))
            for state, model in tables.items()
        }
        counts["finished"] = connection.scalar(
            sa.select(sa.func.count()).where(models.JobRecord.__table__.c.finished_at.is_not(None))
        )
    return counts


def test_the_demo_seed_puts_jobs_in_every_state_once(tmp_path):
    app = seeded_app(tmp_path)
    client = app.test_client()

    with app.app_context():
        engine = app.extensions["solidq"].engine
        # 3 reindexes, 5 syncs, 2 exports, 16 notifications, the first report rebuild, the
        # batch's 3 imports and the search rebuild are ready; the store's other 2 rebuilds wait
        # for its slot; the reminders (an hour ahead) and the digest (collecting for 10
        # minutes) are scheduled.
        seeded = state_counts(engine)
        assert seed.seed() is None  # a restarted demo adds nothing
        assert state_counts(engine) == seeded
        with engine.connect() as connection:
            keys = {row.key: row for row in connection.execute(sa.select(models.CoalesceKey))}
            batches = connection.execute(sa.select(models.BatchRecord.__table__)).all()
            in_batch = connection.scalars(
                sa.select(models.JobRecord.__table__.c.class_name).where(
                    models.JobRecord.__table__.c.batch_id.is_not(None)
                )
            ).all()
            rebuilds = connection.scalar(
                sa.select(sa.func.count()).where(
                    models.JobRecord.__table__.c.class_name == "RebuildSearchIndex"
                )
            )
        engine.dispose()
    # One batch of the 3 imports, its callback stored to run once they are done; one job in
    # steps.
    (batch,) = batches
    assert (batch.total_jobs, batch.pending_jobs, batch.enqueued_at is not None) == (3, 3, True)
    assert "publish_catalog" in batch.on_success
    assert in_batch == ["import_supplier"] * 3
    assert rebuilds == 1
    assert seeded == {
        "ready": 31,
        "scheduled": 4,
        "claimed": 0,
        "blocked": 2,
        "failed": 0,
        "finished": 0,
    }
    # Each product's pending reindex holds its key; the digest holds the customer's 4 calls.
    assert sorted(keys) == [f"reindex_product/{n}" for n in (1, 2, 3)] + [
        f"send_activity_digest/{seed.DIGEST_CUSTOMER}"
    ]
    assert keys[f"send_activity_digest/{seed.DIGEST_CUSTOMER}"].calls_count == 4
    assert seed.describe(None) == "The demo's database already has jobs: nothing seeded."

    page = client.get("/").get_data(as_text=True)
    for product in seed.PRODUCTS:
        assert product in page
    assert "<strong>2</strong> blocked" in page
    blocked = client.get("/solidq/concurrency").get_data(as_text=True)
    assert "rebuild_sales_report/high-street" in blocked
    coalescing = client.get("/solidq/coalescing").get_data(as_text=True)
    assert "send_activity_digest" in coalescing
    assert seed.CATALOG_IMPORT in client.get("/solidq/batches").get_data(as_text=True)
    with app.app_context():
        app.extensions["solidq"].engine.dispose()


def test_a_worker_finds_seeded_jobs_that_fail_that_are_deferred_and_that_block(tmp_path):
    app = seeded_app(tmp_path)
    client = app.test_client()

    # What `flask solidq work` does first, in this process: the CRM queue's jobs run (the
    # syncs finish, the exports fail); then a claim of every queue takes the partner budget's
    # burst and defers the other notifications, the store's first rebuild, and the search
    # queue's jobs (the reindexes, the batch's imports and the rebuild in steps).
    with app.app_context():
        engine = app.extensions["solidq"].engine
        support.register_claimers(engine, [9001])
        crm = claim.claim(engine, claim.QueueSelector(("crm",)), 20, process_id=9001)
        outcomes = [execute.perform(job) for job in crm]
        finalize.finalize_all(engine, 9001, outcomes, preserve_finished=True)
        batch = claim.claim_batch(engine, claim.QueueSelector(("*",)), 50, process_id=9001)
        counts = state_counts(engine)
        with engine.connect() as connection:
            errors = connection.scalars(sa.select(models.FailedExecution.__table__.c.error)).all()
        engine.dispose()

    assert len(crm) == 7
    assert len(batch.deferrals) == seed.PARTNER_ORDERS - 2
    names = sorted(job.class_name for job in batch.jobs)
    assert names == (
        ["RebuildSearchIndex"]
        + ["import_supplier"] * seed.SUPPLIERS
        + ["notify_partner_api"] * 2
        + ["rebuild_sales_report"]
        + ["reindex_product"] * 3
    )
    assert counts == {
        "ready": 0,
        "scheduled": 4 + seed.PARTNER_ORDERS - 2,
        "claimed": 10,
        "blocked": 2,
        "failed": 2,
        "finished": 5,
    }
    assert len(errors) == 2
    for error in map(json.loads, errors):
        assert error["exception_class"] == "example_app.jobs.CrmNotConfigured"
        assert error["message"].startswith("CRM API key is missing: segment ")
        assert error["backtrace"][0] == "Traceback (most recent call last):"
        assert any("example_app/jobs.py" in line for line in error["backtrace"])

    deferred = client.get("/solidq/jobs?state=deferred").get_data(as_text=True)
    assert deferred.count("notify_partner_api") >= seed.PARTNER_ORDERS - 2
    failed = client.get("/solidq/jobs?state=failed").get_data(as_text=True)
    assert "CRM API key is missing" in failed
    with app.app_context():
        app.extensions["solidq"].engine.dispose()


def test_the_seeded_batch_publishes_once_and_the_seeded_rebuild_shows_its_steps(tmp_path):
    app = seeded_app(tmp_path)
    client = app.test_client()

    # A worker of the search queue, as `flask solidq work` runs one, until nothing is left:
    # the seeded reindexes, the batch's imports (and the reindexes they add), its callback and
    # the rebuild in steps.
    with app.app_context():
        engine = app.extensions["solidq"].engine
        support.register_claimers(engine, [9004])
        selector = claim.QueueSelector(("search",))
        while claimed := claim.claim(engine, selector, 10, process_id=9004):
            # The worker's id lets the rebuild save its progress as each step finishes.
            outcomes = [execute.perform(job, process_id=9004) for job in claimed]
            finalize.finalize_all(engine, 9004, outcomes, preserve_finished=True)
        with engine.connect() as connection:
            jobs = models.JobRecord.__table__
            names = connection.scalars(
                sa.select(jobs.c.class_name).where(jobs.c.finished_at.is_not(None))
            ).all()
            rebuild = connection.scalar(
                sa.select(jobs.c.id).where(jobs.c.class_name == "RebuildSearchIndex")
            )
        batch = solidq.batches.find(1)
        engine.dispose()

    assert batch.status.value == "completed"
    assert batch.completed_jobs == batch.total_jobs
    assert names.count("publish_catalog") == 1
    assert names.count("RebuildSearchIndex") == 1
    batches = client.get("/solidq/batches").get_data(as_text=True)
    assert seed.CATALOG_IMPORT in batches
    steps = client.get(f"/solidq/jobs/{rebuild}").get_data(as_text=True)
    assert "<dt>Steps</dt>" in steps
    assert "<li>clear: " in steps
    assert "<li>index: " in steps
    with app.app_context():
        app.extensions["solidq"].engine.dispose()


def test_make_demo_seeds_its_own_database_and_leaves_a_database_url_alone(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert demo._seeds(demo._parse([]))
    assert not demo._seeds(demo._parse(["--no-seed"]))
    monkeypatch.setenv("DATABASE_URL", "sqlite:///elsewhere.db")
    assert not demo._seeds(demo._parse([]))
    assert demo._seeds(demo._parse(["--seed"]))


def test_the_rebuild_button_runs_a_job_in_steps_that_resumes_where_it_stopped(tmp_path):
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/demo.db"})
    with app.app_context(), loggers_kept_enabled():
        flask_migrate.upgrade()
    client = app.test_client()
    for name in ("Teapot", "Kettle", "Mug"):
        client.post("/products", data={"name": name})
    response = client.post("/search/rebuild", follow_redirects=True)
    assert "in steps that resume" in response.get_data(as_text=True)

    with app.app_context():
        engine = app.extensions["solidq"].engine
        support.register_claimers(engine, [9003])
        selector = claim.QueueSelector(("search",))
        jobs = claim.claim(engine, selector, 10, process_id=9003)
        rebuild = [job for job in jobs if job.class_name == "RebuildSearchIndex"]
        others = [job for job in jobs if job.class_name != "RebuildSearchIndex"]
        finalize.finalize_all(
            engine, 9003, [execute.perform(job) for job in others], preserve_finished=True
        )

        # The worker starts stopping once the first product is indexed: the job is interrupted.
        def indexed() -> int:
            count = sa.select(sa.func.count()).where(Product.indexed_at.is_not(None))
            return int(app.extensions["sqlalchemy"].session.scalar(count))

        first = execute.perform(rebuild[0], stopping=lambda: indexed() >= 1)
        finalize.finalize_all(engine, 9003, [first], preserve_finished=True)
        assert first.kind is OutcomeKind.INTERRUPTED
        (again,) = claim.claim(engine, selector, 10, process_id=9003)
        second = execute.perform(again)
        finalize.finalize_all(engine, 9003, [second], preserve_finished=True)
        assert second.kind is OutcomeKind.FINISHED
        assert second.job.step_progress["resumptions"] == 1
        engine.dispose()
