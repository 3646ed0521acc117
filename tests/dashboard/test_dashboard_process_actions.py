"""The processes page's Quiet and Stop buttons with the test client, on every backend: each
process's state and heartbeat, the buttons it offers, a POST that writes the command and
lands back on the page saying so, the refusals said the same way, and the CSRF check.
(A real browser clicking Quiet on a running worker: test_dashboard_process_actions_browser.py.)
"""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.dashboard import csrf
from flask_solidq.timing import utcnow
from tests import support
from tests.dashboard.test_dashboard import csrf_token
from tests.dashboard.test_dashboard import post
from tests.dashboard.test_dashboard_control_pages import tables

if t.TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient

PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    """An app with the dashboard open (testing mode)."""
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def add_process(engine: sa.Engine, kind: str, name: str, supervisor_id: int | None = None) -> int:
    now = utcnow()
    row = {"kind": kind, "name": name, "pid": 7, "supervisor_id": supervisor_id}
    with engine.begin() as connection:
        statement = PROCESSES.insert().values(**row, last_heartbeat_at=now, created_at=now)
        return int(connection.execute(statement).inserted_primary_key[0])


def a_tree(engine: sa.Engine) -> dict[str, int]:
    supervisor = add_process(engine, "Supervisor(fork)", "supervisor-1")
    return {
        "supervisor": supervisor,
        "worker": add_process(engine, "Worker", "worker-1", supervisor),
        "dispatcher": add_process(engine, "Dispatcher", "dispatcher-1", supervisor),
    }


def shown(client: FlaskClient) -> dict[str, tuple[str, str]]:
    """name -> (state, actions) as the page's table shows them."""
    (rows,) = tables(client, "/solidq/processes")
    return {row["Name"]: (row["State"], row["Actions"]) for row in rows}


def commands(engine: sa.Engine) -> dict[str, str | None]:
    return {row.name: row.command for row in support.rows(engine, PROCESSES)}


def test_each_process_shows_its_state_and_the_buttons_that_apply(app, engine, client):
    a_tree(engine)

    assert shown(client) == {
        "supervisor-1": ("running", "Quiet Stop"),
        "worker-1": ("running", "Quiet Stop"),
        "dispatcher-1": ("running", "Stop"),
    }
    (rows,) = tables(client, "/solidq/processes")
    assert all(row["Heartbeat"].endswith("ago") for row in rows)


def test_quiet_then_stop_write_the_command_and_say_so_on_the_page(app, engine, client):
    ids = a_tree(engine)

    quieted = post(client, f"/processes/{ids['supervisor']}/quiet")

    assert quieted.status_code == 303
    assert quieted.location.endswith("/solidq/processes")
    assert "Told Supervisor(fork) supervisor-1 to quiet." in client.get("/solidq/processes").text
    assert shown(client) == {
        "supervisor-1": ("quieting", "Stop"),
        "worker-1": ("quieting", "Stop"),
        "dispatcher-1": ("running", "Stop"),
    }

    post(client, f"/processes/{ids['worker']}/stop")

    assert "Told Worker worker-1 to stop." in client.get("/solidq/processes").text
    assert commands(engine) == {
        "supervisor-1": "quiet",
        "worker-1": "stop",
        "dispatcher-1": None,
    }
    assert shown(client)["worker-1"] == ("stopping", "-")


def test_a_refused_command_says_why_on_the_page_and_changes_nothing(app, engine, client):
    ids = a_tree(engine)
    post(client, f"/processes/{ids['supervisor']}/stop")
    client.get("/solidq/processes")

    def said_after(path: str) -> str:
        response = post(client, path)
        assert response.status_code == 303
        return client.get("/solidq/processes").text

    already = said_after(f"/processes/{ids['worker']}/stop")
    gone = said_after("/processes/999999999/quiet")
    malformed = post(client, "/processes/abc/stop")

    assert f"Worker worker-1 (id {ids['worker']}) is already stopping." in already
    assert "No registered process has the id 999999999;" in gone
    assert malformed.status_code == 400 and "is not a process id" in malformed.text
    assert set(commands(engine).values()) == {"stop"}


def test_an_action_without_the_token_or_as_a_get_is_refused(app, engine, client):
    ids = a_tree(engine)
    token = csrf_token(client)
    path = f"/solidq/processes/{ids['worker']}/stop"

    refusals = [
        client.post(path),
        client.post(path, data={csrf.FIELD: "wrong"}),
        app.test_client().post(path, data={csrf.FIELD: token}),
    ]

    assert [response.status_code for response in refusals] == [400, 400, 400]
    assert client.get(path).status_code == 405
    assert set(commands(engine).values()) == {None}
