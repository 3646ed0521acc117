"""Job definitions called with arguments they don't take: mypy --strict reports each line
marked ``# E: <error code>``, and nothing else.

Type-checked by tests/system/test_typing.py, never run.
"""

from __future__ import annotations

from flask_solidq import SolidQ
from flask_solidq import limits_concurrency
from flask_solidq import retry_on

solidq = SolidQ()


@solidq.job
def send_email(user_id: int, template: str = "welcome", *, urgent: bool = False) -> bool:
    return urgent


@solidq.job(queue="low")
@limits_concurrency(key=lambda account_id: account_id)
@retry_on(TimeoutError, attempts=3)
def sync_account(account_id: int) -> None: ...


send_email.perform_later("1")  # E: arg-type
send_email.perform_later()  # E: call-arg
send_email.perform_later(1, "reset", True)  # E: call-arg
send_email.perform_later(1, tmpl="reset")  # E: call-arg
send_email.new(None)  # E: arg-type
send_email.new(1, 2)  # E: arg-type
send_email.perform_now(user_id=1, extra=True)  # E: call-arg
send_email.perform_now(1, urgent="yes")  # E: arg-type
send_email.set(wait=30).perform_later("1")  # E: arg-type
send_email.set(queue="low").new()  # E: call-arg
send_email.set(priority=1).perform_now(1.5)  # E: arg-type
send_email.set(delay=30)  # E: call-arg
send_email("1")  # E: arg-type
send_email.new(1).perform_later(1)  # E: call-arg
sync_account.perform_later("acct-1")  # E: arg-type
sync_account.set(wait=5).perform_later(1, 2)  # E: call-arg
result: str = send_email(1)  # E: assignment
