"""The dashboard behind a proxy that ends TLS, on every backend: its cookies are Secure when
Flask sees https, which behind a proxy takes Werkzeug's ProxyFix; a request that comes over
http with ``X-Forwarded-Proto: https`` (a proxy Flask doesn't know about) gets one warning per
process naming the fix, and nothing else does."""

from __future__ import annotations

import logging
import typing as t

import pytest
from werkzeug.middleware.proxy_fix import ProxyFix

from flask_solidq.dashboard import csrf
from flask_solidq.dashboard import flash
from flask_solidq.dashboard import proxy
from tests.dashboard import test_dashboard as dashboard_tests
from tests.dashboard.test_dashboard import paused

if t.TYPE_CHECKING:
    from flask import Flask
    from werkzeug.test import TestResponse

PREFIX = "/solidq"
FORWARDED_HTTPS = {"X-Forwarded-Proto": "https"}

# The dashboard tests' fixtures: the dashboard on, a request context per request.
clean_job_module = dashboard_tests.clean_job_module
app = dashboard_tests.app
_push_request_context = dashboard_tests._push_request_context
client = dashboard_tests.client


@pytest.fixture(autouse=True)
def _warn_afresh() -> t.Iterator[None]:
    proxy.forget_warning()
    yield
    proxy.forget_warning()


def proxy_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == proxy.__name__]


def set_cookie(response: TestResponse, name: str) -> str:
    (header,) = [
        value for value in response.headers.getlist("Set-Cookie") if value.startswith(f"{name}=")
    ]
    return header


def behind_proxy_fix(app: Flask) -> Flask:
    app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1)  # type: ignore[method-assign]
    return app


def test_https_forwarded_to_an_app_without_proxy_fix_warns_once_naming_the_fix(app, engine, caplog):
    client = app.test_client()
    with caplog.at_level(logging.WARNING, logger=proxy.__name__):
        first = client.get(PREFIX + "/", headers=FORWARDED_HTTPS)
        client.get(PREFIX + "/", headers=FORWARDED_HTTPS)
        app.test_client().get(PREFIX + "/", headers=FORWARDED_HTTPS)

    assert first.status_code == 200
    (warning,) = proxy_warnings(caplog)
    assert "X-Forwarded-Proto: https" in warning
    assert "ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1)" in warning
    assert "Secure" not in set_cookie(first, csrf.COOKIE)  # what the warning is about


def test_behind_proxy_fix_the_cookies_are_secure_and_nothing_is_logged(app, engine, caplog):
    client = behind_proxy_fix(app).test_client()
    client.environ_base["HTTP_X_FORWARDED_PROTO"] = "https"
    with caplog.at_level(logging.WARNING, logger=proxy.__name__):
        page = client.get(PREFIX + "/")
        token = set_cookie(page, csrf.COOKIE).split(";")[0].split("=", 1)[1]
        action = client.post(
            PREFIX + "/queues/alpha/pause",
            data={csrf.FIELD: token},
            headers={"Origin": "https://localhost"},
        )

    assert page.status_code == 200
    assert "Secure" in set_cookie(page, csrf.COOKIE)
    assert action.status_code == 303, action.get_data(as_text=True)
    assert "Secure" in set_cookie(action, flash.COOKIE)
    assert paused(engine) == {"alpha"}
    assert proxy_warnings(caplog) == []


@pytest.mark.parametrize(
    ("base_url", "headers"),
    [
        ("http://localhost", {}),
        ("http://localhost", {"X-Forwarded-Proto": "http"}),
        ("http://localhost", {"X-Forwarded-Proto": "http, https"}),
        ("https://localhost", FORWARDED_HTTPS),
    ],
    ids=["plain-http", "forwarded-http", "first-proxy-http", "https"],
)
def test_no_warning_when_flask_sees_the_scheme_the_browser_used(
    app, engine, caplog, base_url, headers
):
    with caplog.at_level(logging.WARNING, logger=proxy.__name__):
        response = app.test_client().get(PREFIX + "/", base_url=base_url, headers=headers)

    assert response.status_code == 200
    assert proxy_warnings(caplog) == []
    secure = "Secure" in set_cookie(response, csrf.COOKIE)
    assert secure is base_url.startswith("https")


def test_the_first_forwarded_scheme_counts(app, engine, caplog):
    with caplog.at_level(logging.WARNING, logger=proxy.__name__):
        app.test_client().get(PREFIX + "/", headers={"X-Forwarded-Proto": " HTTPS , http"})

    assert len(proxy_warnings(caplog)) == 1
