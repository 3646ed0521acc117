"""The example's jobs, one in each form of definition, and one for each control: coalescing
(dedupe and collect), a rate limit, a concurrency limit; one that always fails, a recurring
one, a batch of imports with a callback, and a job in steps that resume. Each is cheap and
touches nothing outside the demo's own database."""

from __future__ import annotations

import datetime as dt
import time
import typing as t

import sqlalchemy as sa

from example_app.extensions import db
from example_app.extensions import solidq
from example_app.models import Product
from flask_solidq import Call
from flask_solidq import coalesce
from flask_solidq import current_job
from flask_solidq import limits_concurrency
from flask_solidq import limits_rate


@solidq.job(queue="search")
@coalesce(key=lambda product_id: product_id)
def reindex_product(product_id: int) -> None:
    """Reindex one product (the function form). Clicking "reindex" again while one is pending
    adds nothing: the pending job reads the product fresh when it runs."""
    product = db.session.get(Product, product_id)
    if product is not None:
        time.sleep(0.2)  # the search engine's round trip
        product.indexed_at = dt.datetime.now(dt.timezone.utc)
        db.session.commit()


class SyncContactJob(solidq.Job):
    """Push a contact to the CRM (the class form)."""

    queue_name = "crm"

    def perform(self, contact_id: int, attributes: dict) -> None:
        time.sleep(0.05)


sync_contact = SyncContactJob


@solidq.job(queue="partners")
@limits_rate(to=5, per=dt.timedelta(seconds=10), burst=2, key="global")
@limits_rate(to=1_000, per=dt.timedelta(days=1), burst=50, key="global", name="daily")
def notify_partner_api(order_number: int) -> None:
    """Tell a partner's API about an order. The partner allows 5 calls in any 10 seconds, so
    workers claim 2 at once from a quiet budget, then one every 10 / (5 - 2 + 1) = 2.5 s; and
    1,000 a day, a second budget (``notify_partner_api/daily/global``) each call is charged
    too."""
    time.sleep(0.1)  # the partner's round trip


class CrmNotConfigured(RuntimeError):
    """The CRM's API key is missing: what :func:`export_contacts_to_crm` raises."""


@solidq.job(queue="crm")
def export_contacts_to_crm(segment: str) -> None:
    """Export a segment of contacts to the CRM. It fails on purpose, as the demo has no CRM:
    with no ``retry_on`` a failure is kept at once, a failed job with its backtrace to retry
    or discard from the dashboard."""
    raise CrmNotConfigured(
        f"CRM API key is missing: segment {segment!r} was not exported"
        " (the demo has no CRM; this job fails on purpose)"
    )


#: How long :func:`rebuild_sales_report` takes: under the worker's 5 s shutdown timeout, so
#: Ctrl-C lets a running one finish.
REPORT_SECONDS = 4.0


@solidq.job(queue="reports")
@limits_concurrency(to=1, key=lambda store: store, duration=dt.timedelta(minutes=2))
def rebuild_sales_report(store: str) -> None:
    """Rebuild a store's sales report, one at a time per store: while one runs (a few
    seconds), the store's next ones wait as blocked jobs."""
    time.sleep(REPORT_SECONDS)


@solidq.job(queue="mail")
def remind_abandoned_cart(cart_id: int) -> None:
    """Remind a shopper of the cart they left (the demo schedules these an hour ahead)."""


@solidq.job(queue="mail")
@coalesce(key=lambda customer_id, *_: customer_id, on_conflict="collect")
def send_activity_digest(calls: list[Call]) -> None:
    """One e-mail per customer listing every event collected since the first call: the calls
    wait in the job (the dashboard's Coalescing page) until it runs."""


@solidq.job(queue="maintenance")
def refresh_exchange_rates() -> None:
    """Refresh the shop's currency rates: a recurring task (``SOLIDQ_RECURRING`` in app.py)."""


@solidq.job(queue="search")
def import_supplier(supplier_id: int) -> None:
    """Import a supplier's catalog (the demo's suppliers share the shop's products), then add
    a reindex of each product to this job's own batch: two suppliers that reach the same
    pending product share one reindex (it coalesces), and the batch waits for them all."""
    time.sleep(0.3)  # the supplier's feed
    product_ids = db.session.scalars(sa.select(Product.id).order_by(Product.id)).all()
    batch = current_job.batch
    if batch is None:  # run on its own, outside a batch
        return
    for product_id in product_ids:
        # One block per call: a block holds the coalesce keys it opens until it commits.
        with batch.enqueue():
            reindex_product.perform_later(product_id)


@solidq.job(queue="search")
def publish_catalog(batch: t.Any) -> None:
    """A catalog import's callback: runs once, after every import and every reindex it added
    are done (the batch's ``on_success``)."""


class RebuildSearchIndex(solidq.Job):
    """Rebuild the whole search index in steps that resume: stop the demo (Ctrl-C) while it
    runs, start it again, and it goes on from the last product it reached (the dashboard's job
    page shows its steps and cursor)."""

    queue_name = "search"

    def perform(self) -> None:
        self.step("clear", self.clear)
        self.step("index", self.index)

    def clear(self, step: t.Any) -> None:
        time.sleep(0.2)  # drop the old index

    def index(self, step: t.Any) -> None:
        query = sa.select(Product).order_by(Product.id)
        if step.cursor is not None:
            query = query.where(Product.id > step.cursor)
        for product in db.session.scalars(query).all():
            time.sleep(0.5)  # the search engine's round trip
            product.indexed_at = dt.datetime.now(dt.timezone.utc)
            db.session.commit()
            step.advance(product.id)  # a stopping worker interrupts the job here
