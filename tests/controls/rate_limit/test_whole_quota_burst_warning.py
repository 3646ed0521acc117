"""The warning about a limit counted in units whose burst is its whole quota
(``limits_rate(cost=..., burst=to)``): given once per process and limit, as workers start,
and never by declaring the limit, loading the app, or a command that starts no worker."""

from __future__ import annotations

import logging
import typing as t

import pytest

from flask_solidq import limits_rate
from flask_solidq.controls.rate_limit import declaration
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.processes import launcher
from tests import support
from tests.support import solidq

WARNING = "as burst=to does"


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> t.Iterator[None]:
    """Nothing warned about yet, as in a new process."""
    monkeypatch.setattr(declaration, "_warned", set())
    yield
    log_subscriber.disconnect()


@solidq.job(name="quota_warning_test.whole_quota")
@limits_rate(to=100, per=60, burst=100, key="tokens", cost=lambda units: units)
def whole_quota(units: int) -> None:
    """Charges its units against a quota that a burst spends at once."""


@solidq.job(name="quota_warning_test.largest_call")
@limits_rate(to=100, per=60, burst=10, key="tokens", cost=lambda units: units)
def largest_call(units: int) -> None:
    """Charges its units against a burst of the largest call: refills as the docs advise."""


@solidq.job(name="quota_warning_test.calls")
@limits_rate(to=5, per=60, burst=5, key="calls")
def calls() -> None:
    """Counts calls, not units: burst=to is the plain burst."""


def warnings_about(caplog: pytest.LogCaptureFixture, job_name: str) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if WARNING in record.getMessage() and job_name in record.getMessage()
    ]


def test_two_worker_starts_in_one_process_warn_once_of_the_whole_quota_limit(caplog):
    caplog.set_level(logging.WARNING, logger="flask_solidq")
    app = support.create_app("sqlite://")

    launcher.supervisor(app, mode="thread", only="worker")
    launcher.supervisor(app, mode="thread", once=True)

    (message,) = warnings_about(caplog, "quota_warning_test.whole_quota")
    assert "limits_rate(to=100, burst=100, cost=...) admits 100 units at once" in message
    assert "set burst to the largest call's cost" in message
    assert warnings_about(caplog, "quota_warning_test.largest_call") == []
    assert warnings_about(caplog, "quota_warning_test.calls") == []


def test_declaring_the_limit_warns_of_nothing(caplog):
    caplog.set_level(logging.WARNING, logger="flask_solidq")

    limits_rate(to=50, per=60, burst=50, key="tokens", cost=3)

    assert [record for record in caplog.records if WARNING in record.getMessage()] == []


@pytest.mark.parametrize(
    "args", [["--help"], ["solidq", "--help"], ["solidq", "work", "--help"], ["solidq", "status"]]
)
def test_commands_that_start_no_worker_warn_of_nothing(app, caplog, args):
    caplog.set_level(logging.WARNING, logger="flask_solidq")

    result = app.test_cli_runner().invoke(args=args)

    assert result.exit_code == 0, result.output
    assert WARNING not in result.output
    assert warnings_about(caplog, "quota_warning_test.whole_quota") == []
