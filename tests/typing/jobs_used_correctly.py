"""Job definitions used correctly: mypy --strict passes, and each ``assert_type`` holds.

Type-checked by tests/system/test_typing.py, never run.
"""

from __future__ import annotations

import datetime as dt

from typing_extensions import assert_type

from flask_solidq import Call
from flask_solidq import Job
from flask_solidq import SolidQ
from flask_solidq import coalesce
from flask_solidq import limits_rate
from flask_solidq import retry_on
from flask_solidq import testing
from flask_solidq.definitions.function_job import FunctionJob

solidq = SolidQ()
stripe_quota = limits_rate(to=100, per=60, key="global", group="Stripe")


@solidq.job
def send_email(user_id: int, template: str = "welcome", *, urgent: bool = False) -> bool:
    return urgent


@solidq.job(queue="search", priority=5)
@stripe_quota
@retry_on(TimeoutError, attempts=3)
def reindex_product(product_id: int) -> None: ...


@solidq.job
@coalesce(key=lambda shop, sku: shop, on_conflict="collect")
def push_inventory(calls: list[Call]) -> int:
    return len(calls)


@limits_rate(to=10, per=dt.timedelta(minutes=1), key="global")
class SyncStripeJob(Job):
    queue_name = "stripe"

    def perform(self, account_id: int) -> str:
        return str(account_id)


class ReportJob(Job, abstract=True):
    queue_name = "reports"


class MonthlyReportJob(ReportJob):
    def perform(self, month: str) -> None: ...


# A function job: the definition takes the function's arguments and returns what it returns.
assert_type(send_email(1), bool)
assert_type(send_email(1, "reset", urgent=True), bool)
assert_type(send_email.perform_now(1, template="reset"), bool)
queued: FunctionJob[..., bool] = send_email.perform_later(1)
assert_type(send_email.perform_later(1).perform_now(), bool)
email = send_email.new(1, "reset")
assert_type(email.set(wait=30, queue="mail").perform_later().perform_now(), bool)
assert_type(email.perform_now(), bool)
assert_type(send_email.set(wait=dt.timedelta(seconds=30)).perform_later(2, urgent=True).job_id, str)
assert_type(send_email.set(priority=-1).perform_now(2), bool)
enqueued: FunctionJob[..., bool] = send_email.set(queue="mail").new(3)
reindex_product.perform_later(42)
reindex_product.set(wait_until=dt.datetime(2030, 1, 1)).perform_later(product_id=42)

# A collecting job takes each call's own arguments.
push_inventory.perform_later("shop-1", "sku-1")
push_inventory.set(wait=30).perform_later("shop-1", sku="sku-2")

# A class job: its methods return the job's own class.
assert_type(SyncStripeJob.perform_later(7), SyncStripeJob)
assert_type(SyncStripeJob.set(queue="low").perform_later(7), SyncStripeJob)
assert_type(SyncStripeJob.new(7).set(priority=3), SyncStripeJob)
assert_type(SyncStripeJob.new(7).perform_later().provider_job_id, int | None)
assert_type(MonthlyReportJob.set(wait=60).new("2024-01"), MonthlyReportJob)

# Both kinds are Job subclasses: anything that takes a definition takes either.
definitions: list[type[Job]] = [send_email, reindex_product, push_inventory, SyncStripeJob]
solidq.perform_all_later([send_email.new(1), SyncStripeJob.new(2), push_inventory.new("s", 1)])
solidq.perform_after_commit(reindex_product.new(42))
testing.perform_enqueued_jobs(only=[send_email, SyncStripeJob])
with testing.assert_enqueued_with(job=send_email, args=[1]):
    send_email.perform_later(1)
