"""The example's jobs, one in each form of definition."""

from __future__ import annotations

import datetime as dt
import time

from example_app.extensions import db
from example_app.extensions import solidq
from example_app.models import Product


@solidq.job(queue="search")
def reindex_product(product_id: int) -> None:
    """Reindex one product (the function form)."""
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
