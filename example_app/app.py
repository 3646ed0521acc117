"""The app factory and its one page: enqueue jobs, and see what is queued.

``make demo`` (from the repository's top folder) migrates the SQLite database in
``example_app/instance/`` and serves the app on http://127.0.0.1:5000 (``make demo PORT=5001``
for another port). The page refreshes its changing regions every 2 s with htmx, the copy
vendored in flask-solidq's static folder (the one its dashboard uses): no CDN, no build step.
"""

from __future__ import annotations

import datetime as dt
import os

import sqlalchemy as sa
from flask import Blueprint
from flask import Flask
from flask import Response
from flask import abort
from flask import flash
from flask import make_response
from flask import redirect
from flask import render_template
from flask import request
from flask import url_for

from example_app import jobs
from example_app.extensions import db
from example_app.extensions import migrate
from example_app.extensions import solidq
from example_app.models import Product
from flask_solidq import models as queue
from flask_solidq.controls.rate_limit.budgets import IS_DEFERRED
from flask_solidq.storage.resources import resource_dir

pages = Blueprint("pages", __name__)

#: flask-solidq's own static files, served at /solidq-static/ for the page's htmx.
solidq_static = Blueprint(
    "solidq_static",
    __name__,
    static_folder=str(resource_dir("static")),
    static_url_path="/solidq-static",
)

#: The vendored htmx, under flask-solidq's static folder (its licence is beside it).
HTMX_SCRIPT = "solidq/htmx-2.0.11.min.js"

STATES = {
    "ready": queue.ReadyExecution,
    "scheduled": queue.ScheduledExecution,
    "claimed": queue.ClaimedExecution,
    "blocked": queue.BlockedExecution,
    "failed": queue.FailedExecution,
}

#: The budget every ``notify_partner_api`` call shares (its key is the literal "global").
PARTNER_BUDGET = jobs.notify_partner_api.rate_limit_key_for()

#: The demo's recurring tasks, which `flask solidq work` runs (its scheduler stores them, and
#: the dashboard's Recurring page lists them): one of the shop's own, and the housekeeping a
#: real app would schedule too.
RECURRING = {
    "refresh_exchange_rates": {
        "job": "example_app.jobs:refresh_exchange_rates",
        "schedule": "every 5 minutes",
        "description": "the shop's currency rates",
    },
    "clear_finished_jobs": {
        "job": "flask_solidq.housekeeping:ClearFinishedJobs",
        "schedule": "every hour at minute 12",
        "description": "finished jobs older than a day",
    },
}


@solidq.dashboard_auth
def dashboard_for_this_machine() -> bool:
    """The demo's dashboard (/solidq) is open to this machine only, as the demo serves
    127.0.0.1; an app of yours would check its own users here (see the README's Dashboard)."""
    return request.remote_addr in ("127.0.0.1", "::1")


def create_app(config: dict | None = None) -> Flask:
    """Build the example app; ``DATABASE_URL`` overrides its SQLite database."""
    app = Flask(__name__, instance_relative_config=True)
    os.makedirs(app.instance_path, exist_ok=True)
    default_url = f"sqlite:///{os.path.join(app.instance_path, 'demo.db')}"
    app.config.update(
        SECRET_KEY="demo only",
        SQLALCHEMY_DATABASE_URI=os.environ.get("DATABASE_URL", default_url),
        SOLIDQ_RECURRING=RECURRING,
    )
    app.config.update(config or {})
    db.init_app(app)
    migrate.init_app(app, db)
    solidq.init_app(app)
    app.register_blueprint(pages)
    app.register_blueprint(solidq_static)
    return app


@pages.get("/")
def index() -> Response:
    """The page; for the page's own poll (an htmx request), only the regions that change."""
    polled = request.headers.get("HX-Request") == "true"
    response = make_response(
        render_template(
            "_live.html" if polled else "index.html",
            products=db.session.scalars(sa.select(Product).order_by(Product.id)).all(),
            counts=queue_counts(),
            recent=recent_jobs(),
            partner=partner_budget(),
            imports=recent_batches(),
            htmx_script=HTMX_SCRIPT,
        )
    )
    response.vary.add("HX-Request")  # one URL, two bodies: caches must tell them apart
    return response


@pages.post("/products")
def add_product():
    product = Product(name=request.form.get("name") or "Unnamed product")
    db.session.add(product)
    db.session.commit()
    job = jobs.reindex_product.perform_later(product.id)
    flash(f"Added {product.name}; its reindex is job {job.provider_job_id}.")
    return redirect(url_for("pages.index"))


def form_number(name: str, default: int, *, least: int, most: int) -> int:
    """The form's whole number ``name`` (``default`` when it is left out); a 400 answer for
    anything else, or a number outside ``least``..``most``."""
    text = request.form.get(name) or str(default)
    try:
        number = int(text)
    except ValueError:
        abort(400, f"{name} must be a whole number, not {text!r}.")
    if not least <= number <= most:
        abort(400, f"{name} must be between {least} and {most}, not {number}.")
    return number


@pages.post("/products/<int:product_id>/reindex")
def reindex(product_id: int):
    db.get_or_404(Product, product_id, description=f"There is no product {product_id}.")
    wait = form_number("wait", 0, least=0, most=86_400)
    job = jobs.reindex_product.set(wait=wait).perform_later(product_id)
    if job.coalesce_status == "discarded":
        flash(f"Product {product_id} already has a pending reindex, job {job.provider_job_id}.")
    else:
        flash(f"Reindex of product {product_id}: job {job.provider_job_id}.")
    return redirect(url_for("pages.index"))


@pages.post("/contacts/sync")
def sync_contacts():
    count = form_number("count", 100, least=1, most=1_000)
    solidq.perform_all_later([jobs.sync_contact.new(n, {"plan": "pro"}) for n in range(count)])
    flash(f"Queued {count} contact syncs in one bulk enqueue.")
    return redirect(url_for("pages.index"))


@pages.post("/catalog/import")
def import_catalog():
    suppliers = form_number("suppliers", 3, least=1, most=20)
    with solidq.batch(on_success=jobs.publish_catalog, label="catalog import") as batch:
        solidq.perform_all_later([jobs.import_supplier.new(n) for n in range(1, suppliers + 1)])
    flash(
        f"Catalog import: batch {batch.id} of {suppliers} supplier imports; each adds the"
        " reindexes it needs, and publish_catalog runs once they are all done."
    )
    return redirect(url_for("pages.index"))


@pages.post("/search/rebuild")
def rebuild_search_index():
    job = jobs.RebuildSearchIndex.perform_later()
    flash(
        f"Rebuilding the search index: job {job.provider_job_id}, in steps that resume (stop the"
        " demo while it runs and start it again: it goes on from the last product it reached)."
    )
    return redirect(url_for("pages.index"))


@pages.post("/partners/notify")
def notify_partners():
    count = form_number("count", 20, least=1, most=200)
    solidq.perform_all_later([jobs.notify_partner_api.new(n) for n in range(1, count + 1)])
    limit = jobs.notify_partner_api
    interval = limit.rate_limit_per / (limit.rate_limit_to - limit.rate_limit_burst + 1)
    flash(
        f"Queued {count} partner notifications: a quiet budget lets {limit.rate_limit_burst}"
        f" run at once, then one every {interval:g} s."
    )
    return redirect(url_for("pages.index"))


def partner_budget() -> dict[str, object]:
    """The partner API's budget, as ``solidq.rate_limiter`` reads it from its row: the jobs
    waiting on it, and when the next claim would be admitted and the next waiting job looked
    at again."""
    state = solidq.rate_limiter.state(PARTNER_BUDGET)
    return {
        "key": state.key,
        "limit": jobs.notify_partner_api,
        "waiting": state.waiting,
        "next_admission": time_from_now(state.next_admission_at),
        "next_check": time_from_now(state.next_check_at) if state.next_check_at else None,
    }


def time_from_now(moment: dt.datetime) -> str:
    """``now``, or ``in 2.4 s``."""
    seconds = (moment - dt.datetime.now(dt.timezone.utc)).total_seconds()
    return "now" if seconds <= 0 else f"in {seconds:.1f} s"


#: A scheduled execution joined to its job, to tell a deferred one (its rate limit put it off:
#: the dashboard's and ``flask solidq status``'s "deferred") from one scheduled with ``wait=``.
_SCHEDULED_JOBS = queue.ScheduledExecution.__table__.join(
    queue.JobRecord.__table__,
    queue.ScheduledExecution.__table__.c.job_id == queue.JobRecord.__table__.c.id,
)


def queue_counts() -> dict[str, int]:
    """How many jobs are in each state: which execution table holds them, the deferred ones
    apart from the scheduled ones (the same table holds both)."""
    counts = {
        state: db.session.scalar(sa.select(sa.func.count()).select_from(model)) or 0
        for state, model in STATES.items()
    }
    deferred = sa.select(sa.func.count()).select_from(_SCHEDULED_JOBS).where(IS_DEFERRED)
    counts["deferred"] = db.session.scalar(deferred) or 0
    counts["scheduled"] -= counts["deferred"]
    # Deferred shown beside scheduled, as the dashboard's overview shows them.
    first = ["ready", "scheduled", "deferred"]
    rest = [state for state in counts if state not in first]
    counts = {state: counts[state] for state in [*first, *rest]}
    finished = sa.select(sa.func.count()).where(queue.JobRecord.finished_at.is_not(None))
    counts["finished"] = db.session.scalar(finished) or 0
    return counts


def recent_jobs() -> list[tuple[queue.JobRecord, str]]:
    """The latest 20 jobs, each with its state."""
    records = db.session.scalars(
        sa.select(queue.JobRecord).order_by(queue.JobRecord.id.desc()).limit(20)
    ).all()
    ids = [record.id for record in records]
    state_of = {}
    for state, model in STATES.items():
        for job_id in db.session.scalars(sa.select(model.job_id).where(model.job_id.in_(ids))):
            state_of[job_id] = state
    deferred = sa.select(queue.ScheduledExecution.__table__.c.job_id).select_from(_SCHEDULED_JOBS)
    for job_id in db.session.scalars(deferred.where(IS_DEFERRED, queue.JobRecord.id.in_(ids))):
        state_of[job_id] = "deferred"
    return [
        (record, state_of.get(record.id, "finished" if record.finished_at else "unknown"))
        for record in records
    ]


def recent_batches() -> list[queue.BatchRecord]:
    """The latest 3 catalog imports (batches), with their counters."""
    return list(
        db.session.scalars(
            sa.select(queue.BatchRecord).order_by(queue.BatchRecord.id.desc()).limit(3)
        )
    )
