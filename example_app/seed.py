"""The demo's first jobs: a few in every state, so the dashboard (/solidq) shows a queue at
work within the demo's first minute instead of empty tables.

``make demo`` seeds its own database once, when it holds no job yet (a restarted demo doesn't
pile up more); ``python -m example_app.demo --seed`` seeds a database of ``DATABASE_URL`` too.
What the worker then makes of each kind:

* finished: the products' reindexes and a bulk of contact syncs, within seconds;
* failed: two CRM exports, which raise (the demo has no CRM key) and have no retries;
* scheduled: abandoned-cart reminders, an hour ahead;
* deferred: partner notifications over their rate limit (2 at once, then one every 2.5 s);
* blocked: sales-report rebuilds of one store, one at a time for a few seconds each;
* coalescing: an activity digest whose calls wait in one job for 10 minutes;
* a batch: a catalog import of three suppliers, whose callback publishes the catalog once the
  imports and the reindexes they add are done (the dashboard's Batches page);
* steps: a search index rebuild, whose job page shows its steps and cursor as it goes (and,
  stopped and restarted, where it resumed).
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from flask import current_app

from example_app import jobs
from example_app.extensions import db
from example_app.extensions import solidq
from example_app.models import Product
from flask_solidq import models as queue

PRODUCTS = ("Teapot", "Kettle", "Tea cosy")
CONTACT_SYNCS = 5
CRM_SEGMENTS = ("newsletter", "wholesale")
ABANDONED_CARTS = (101, 102, 103)
#: 2 run at once, the other 14 wait their turn over the next 35 s.
PARTNER_ORDERS = 16
#: One store's rebuilds: one runs while the other two are blocked.
REPORT_STORE = "high-street"
REPORT_REBUILDS = 3
DIGEST_CUSTOMER = 7
DIGEST_EVENTS = ("viewed Teapot", "added Teapot to cart", "viewed Kettle", "left a review")
DIGEST_WAIT = dt.timedelta(minutes=10)
REMINDER_WAIT = dt.timedelta(hours=1)
SUPPLIERS = 3
#: The catalog import's label, as the dashboard's Batches page shows it.
CATALOG_IMPORT = "catalog import"


def seed() -> dict[str, int] | None:
    """Enqueue the demo's jobs (and its products, if it has none) in the app's context; how
    many jobs of each kind, or None when the database already holds jobs."""
    if has_jobs():
        return None
    product_ids = _products()
    return {
        "reindexes": _reindexes(product_ids),
        "contact syncs": _contact_syncs(),
        "CRM exports": _crm_exports(),
        "cart reminders": _cart_reminders(),
        "partner notifications": _partner_notifications(),
        "report rebuilds": _report_rebuilds(),
        "digest calls": _digest_calls(),
        "supplier imports in a batch": _catalog_import(),
        "search rebuild in steps": _search_rebuild(),
    }


def has_jobs() -> bool:
    """Whether any job, in any state, is in the queue's tables."""
    engine: sa.Engine = current_app.extensions["solidq"].engine
    with engine.connect() as connection:
        return connection.scalar(sa.select(queue.JobRecord.id).limit(1)) is not None


def describe(seeded: dict[str, int] | None) -> str:
    """The line the demo prints about its seed."""
    if seeded is None:
        return "The demo's database already has jobs: nothing seeded."
    kinds = ", ".join(f"{count} {kind}" for kind, count in seeded.items())
    return f"Seeded the demo with {kinds}: the dashboard is at /solidq/."


def _products() -> list[int]:
    """The shop's product ids, adding the demo's three first if it has none. The session's
    transaction ends here, so no enqueue after it joins it (see the README's Transactions)."""
    ids = list(db.session.scalars(sa.select(Product.id).order_by(Product.id)))
    if not ids:
        products = [Product(name=name) for name in PRODUCTS]
        db.session.add_all(products)
        db.session.flush()
        ids = [product.id for product in products]
    db.session.commit()
    return ids


def _reindexes(product_ids: list[int]) -> int:
    for product_id in product_ids:
        jobs.reindex_product.perform_later(product_id)
    return len(product_ids)


def _contact_syncs() -> int:
    solidq.perform_all_later(
        [jobs.sync_contact.new(n, {"plan": "pro"}) for n in range(1, CONTACT_SYNCS + 1)]
    )
    return CONTACT_SYNCS


def _crm_exports() -> int:
    for segment in CRM_SEGMENTS:
        jobs.export_contacts_to_crm.perform_later(segment)
    return len(CRM_SEGMENTS)


def _cart_reminders() -> int:
    reminders = jobs.remind_abandoned_cart.set(wait=REMINDER_WAIT)
    for cart_id in ABANDONED_CARTS:
        reminders.perform_later(cart_id)
    return len(ABANDONED_CARTS)


def _partner_notifications() -> int:
    solidq.perform_all_later([jobs.notify_partner_api.new(n) for n in range(1, PARTNER_ORDERS + 1)])
    return PARTNER_ORDERS


def _report_rebuilds() -> int:
    for _ in range(REPORT_REBUILDS):
        jobs.rebuild_sales_report.perform_later(REPORT_STORE)
    return REPORT_REBUILDS


def _digest_calls() -> int:
    digest = jobs.send_activity_digest.set(wait=DIGEST_WAIT)
    for event in DIGEST_EVENTS:
        digest.perform_later(DIGEST_CUSTOMER, event)
    return len(DIGEST_EVENTS)


def _catalog_import() -> int:
    """One batch of supplier imports with its callback, as the page's import button makes it."""
    with solidq.batch(on_success=jobs.publish_catalog, label=CATALOG_IMPORT):
        solidq.perform_all_later([jobs.import_supplier.new(n) for n in range(1, SUPPLIERS + 1)])
    return SUPPLIERS


def _search_rebuild() -> int:
    jobs.RebuildSearchIndex.perform_later()
    return 1
