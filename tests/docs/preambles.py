"""What each page's samples take as given: the names a reader's app would have defined before
(its models, its other jobs, its clients of other services), run before the page's first sample.

The third-party clients (Stripe, Sentry, statsd, a CRM...) are stand-ins that record nothing;
every ``flask_solidq`` call the samples make is real, on a real SQLite database.
"""

from __future__ import annotations

import typing as t

#: Run for every page, before its own preamble: what the README's setup and the pages' opening
#: imports give each sample (``app``, ``db`` and ``solidq`` are put in by the test).
COMMON = """
import os
from datetime import date, datetime, time, timedelta, timezone
from types import SimpleNamespace

import sqlalchemy as sa
from flask import redirect, request, url_for
from flask_solidq import (
    coalesce, current_job, discard_on, limits_concurrency, limits_rate, retry_on, signals,
)


class StandIn:
    '''A client of another service: any attribute is a callable that does nothing.'''

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


statsd = inventory = crm = search_index = digest_mailer = redis_client = StandIn()


class Product(db.Model):
    __tablename__ = "products"
    id = db.Column(db.Integer, primary_key=True)
    account_id = db.Column(db.Integer, nullable=False)
    name = db.Column(db.String(100), nullable=False)


class Shop(db.Model):
    __tablename__ = "shops"
    id = db.Column(db.Integer, primary_key=True)


class Order(db.Model):
    __tablename__ = "orders"
    id = db.Column(db.Integer, primary_key=True)
    customer_id = db.Column(db.Integer, nullable=False)
"""

#: Rows the samples read, stored once the tables exist.
ROWS = """
product = Product(id=7, account_id=3, name="Lamp")
products = [product, Product(id=8, account_id=3, name="Desk")]
shop = Shop(id=42)
order = Order(id=5, customer_id=1)
db.session.add_all([*products, shop, order])
db.session.commit()
"""

SENTRY = """
import sys
sys.modules["sentry_sdk"] = sentry_sdk = StandIn()
"""

JOBS = """
@solidq.job
def reindex_product(product_id):
    ...


class SyncStripeJob(solidq.Job):
    queue_name = "stripe"

    def perform(self, account_id):
        ...
"""

#: page -> {index of a sample: what runs just before it}
BEFORE: dict[str, dict[int, str]] = {
    "docs/coalescing.md": {
        # A call as a collecting job's run gets it (perform_now: the call was never stored).
        13: """
captured = []

@solidq.job(name="capture_calls")
@coalesce(key=lambda account_id, *_: account_id, on_conflict="collect")
def capture_calls(calls):
    captured.extend(calls)

capture_calls.perform_now(3, 7)
call = captured[0]
""",
        # The jobs of a bulk enqueue that failed part way (none stored), then a new list.
        15: "jobs = [reindex_product.new(101), reindex_product.new(102)]",
        16: "jobs = [reindex_product.new(103), reindex_product.new(104)]",
    },
    # The page's first three samples use the test adapter; its clock samples, the database
    # queue.
    "docs/testing.md": {
        3: """
from flask_solidq.config import Adapter
from flask_solidq.state import get_state
get_state().adapter = Adapter.SOLIDQ
""",
    },
}

#: page -> (extra Flask config, preamble)
PAGES: dict[str, tuple[dict[str, t.Any], str]] = {
    "docs/arguments.md": (
        {},
        """
import decimal

class Money:
    def __init__(self, amount, currency):
        self.amount, self.currency = decimal.Decimal(amount), currency
""",
    ),
    "docs/batches.md": (
        {},
        """
Supplier = Catalog = StandIn()
notify_ops = print
catalog_id = 1
supplier_ids = [1, 2, 3]
""",
    ),
    "docs/coalescing.md": (
        {},
        """
user = SimpleNamespace(id=1, name="Ada", email="ada@example.com")
account = SimpleNamespace(id=3)
event = SimpleNamespace(id=11)
""",
    ),
    "docs/dashboard.md": (
        {},
        """
import sys
os = SimpleNamespace(environ={"SOLIDQ_DASHBOARD_PASSWORD": "a password"})
sys.modules["flask_login"] = SimpleNamespace(
    current_user=SimpleNamespace(is_authenticated=True, is_admin=True)
)
""",
    ),
    "docs/enqueuing.md": ({}, JOBS),
    # The named budgets' samples call Stripe from views and scripts.
    "docs/rate-limits.md": (
        {},
        """
class NestedStandIn:
    '''A client whose attributes nest (stripe.Invoice.create): each does nothing.'''

    def __getattr__(self, name):
        return NestedStandIn()

    def __call__(self, *args, **kwargs):
        return None


stripe = NestedStandIn()
""",
    ),
    "docs/failures.md": (
        {},
        """
class ServiceBusy(Exception):
    pass

@solidq.job
def send_digest():
    ...
""",
    ),
    "docs/hooks.md": ({}, SENTRY),
    "docs/signals.md": ({}, SENTRY),
    "docs/jobs.md": ({}, ""),
    "docs/testing.md": (
        {"SOLIDQ_ADAPTER": "test"},
        """
from flask_solidq.testing.pytest_plugin import JobRecorder

@solidq.job(queue="mail")
def send_welcome_mail(user_id):
    ...

class SendReceiptJob(solidq.Job):
    def perform(self):
        ...

@app.post("/signup")
def signup():
    send_welcome_mail.perform_later(1)
    return "welcome"

@app.post("/checkout")
def checkout():
    SendReceiptJob.perform_later()
    return "paid"

client = app.test_client()
solidq_jobs = JobRecorder()
""",
    ),
    "docs/transactions.md": (
        {},
        """
@solidq.job
def send_confirmation(order_id):
    ...

@solidq.job
def audit(kind, record_id):
    ...

def charge_card(order):
    pass
""",
    ),
}


def preamble(page: str) -> tuple[dict[str, t.Any], str]:
    config, code = PAGES.get(page, ({}, ""))
    return config, COMMON + code
