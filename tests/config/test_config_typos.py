"""A ``SOLIDQ_*`` key flask-solidq doesn't read is most likely misspelled: ``init_app`` logs
one warning for it, naming the closest key it does read. The known keys are those of
:data:`flask_solidq.config.DEFAULTS` and the dashboard's own, so a key added to the defaults
is known at once."""

from __future__ import annotations

import logging

import pytest

from flask_solidq import config
from flask_solidq import dashboard
from tests import support


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "flask_solidq" and record.levelno == logging.WARNING
    ]


def test_a_misspelled_key_is_named_with_the_key_it_likely_meant(caplog):
    with caplog.at_level(logging.WARNING, logger="flask_solidq"):
        app = support.create_app("sqlite://", SOLIDQ_DASHBORD_BASIC_AUTH=("admin", "secret"))

    assert warnings_of(caplog) == [
        "SolidQ: SOLIDQ_DASHBORD_BASIC_AUTH is not a flask-solidq setting; did you mean"
        " SOLIDQ_DASHBOARD_BASIC_AUTH?"
    ]
    assert app.extensions["solidq"].settings.dashboard_basic_auth is None  # as it was


def test_each_misspelled_key_is_named_once(caplog):
    with caplog.at_level(logging.WARNING, logger="flask_solidq"):
        support.create_app("sqlite://", SOLIDQ_WORKER=[{"threads": 1}], SOLIDQ_RECURING={})

    assert warnings_of(caplog) == [
        "SolidQ: SOLIDQ_RECURING is not a flask-solidq setting; did you mean SOLIDQ_RECURRING?",
        "SolidQ: SOLIDQ_WORKER is not a flask-solidq setting; did you mean SOLIDQ_WORKERS?",
    ]


def test_a_key_like_no_setting_is_said_to_be_ignored(caplog):
    with caplog.at_level(logging.WARNING, logger="flask_solidq"):
        support.create_app("sqlite://", SOLIDQ_FROBNICATE=True)

    assert warnings_of(caplog) == [
        "SolidQ: SOLIDQ_FROBNICATE is not a flask-solidq setting; it is ignored."
    ]


def test_every_key_flask_solidq_reads_and_other_prefixes_pass_without_a_word(caplog):
    keys = {key: config.DEFAULTS[key] for key in config.DEFAULTS}
    keys["SOLIDQ_DASHBOARD_SECRET_KEY"] = "k" * 32
    keys["SOLIDQ_DASHBOARD_REFRESH_INTERVAL"] = 5
    keys["SOLIDQ_DASHBOARD"] = False
    with caplog.at_level(logging.WARNING, logger="flask_solidq"):
        support.create_app("sqlite://", MY_SOLIDQ_FLAG=1, solidq_lowercase=2, **keys)

    assert set(dashboard.SETTINGS) <= set(keys)
    assert warnings_of(caplog) == []


def test_a_key_added_to_the_defaults_table_is_known(caplog, monkeypatch):
    with caplog.at_level(logging.WARNING, logger="flask_solidq"):
        support.create_app("sqlite://", SOLIDQ_LATER_SETTING=1)
    assert len(warnings_of(caplog)) == 1
    caplog.clear()

    monkeypatch.setitem(config.DEFAULTS, "SOLIDQ_LATER_SETTING", 0)
    with caplog.at_level(logging.WARNING, logger="flask_solidq"):
        support.create_app("sqlite://", SOLIDQ_LATER_SETTING=1)

    assert warnings_of(caplog) == []
