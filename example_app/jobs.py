"""The example's jobs, one in each form of definition, one coalescing its repeated calls and
one with a rate limit."""

from __future__ import annotations

import datetime as dt
import time

from example_app.extensions import db
from example_app.extensions import solidq
from example_app.models import Product
from flask_solidq import coalesce
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
def notify_partner_api(order_number: int) -> None:
    """Tell a partner's API about an order. The partner allows 5 calls in any 10 seconds, so
    workers claim 2 at once from a quiet budget, then one every 10 / (5 - 2 + 1) = 2.5 s."""
    time.sleep(0.1)  # the partner's round trip
