"""Every dashboard route and every CLI command under random input, on every backend: no answer
is a 5xx, no exception escapes (a traceback), and a refused request changes nothing.

Hypothesis draws the requests: a route of the dashboard's blueprint with its path parts filled
from :data:`NASTY` (ids past ``bigint``, digits of other scripts, ``..`` and encoded slashes,
NULs, the characters a URL gives meaning to, long and empty names) or from the names the
seeded queue really has; query strings and form fields of the names the views read, plus
others; POSTs with the page's CSRF token or without. The CLI gets each ``flask solidq``
command (but ``work`` and ``install``, which serve and write files) with arguments and options
drawn the same way. Before each request, a snapshot of every table; a request that the
dashboard refused (4xx) or a command that exited non-zero must leave it as it was.

The examples are drawn the same way on every run (``derandomize``), so CI is repeatable;
``SOLIDQ_FUZZ_EXAMPLES=N`` draws N per test (shared among its routes or commands),
``SOLIDQ_FUZZ_RANDOM=1`` draws new ones.
"""

from __future__ import annotations

import os
import re
import typing as t
from urllib.parse import quote

import click
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from flask_solidq import models
from flask_solidq.dashboard import csrf
from flask_solidq.dashboard import selection_views
from tests import support
from tests.dashboard import test_dashboard as dashboard_tests
from tests.jobs import dashboard as jobs
from tests.operations.test_job_actions import enqueue

if t.TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient

# The dashboard tests' fixtures: the dashboard on, no request context kept pushed.
clean_job_module = dashboard_tests.clean_job_module
app = dashboard_tests.app
_push_request_context = dashboard_tests._push_request_context

PREFIX = "/solidq"
EXAMPLES = int(os.environ.get("SOLIDQ_FUZZ_EXAMPLES") or 400)


def per_target(targets: int) -> settings:
    """Hypothesis' settings for one of ``targets`` routes or commands: its share of
    :data:`EXAMPLES`, drawn the same way on every run unless ``SOLIDQ_FUZZ_RANDOM`` is set."""
    return settings(
        max_examples=max(10, EXAMPLES // targets),
        deadline=None,
        derandomize=not os.environ.get("SOLIDQ_FUZZ_RANDOM"),
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


#: The queue and the job the seeded rows use.
QUEUE = "fuzz-queue"
#: Values that have broken parsers of ids, names and paths somewhere.
NASTY = [
    "0",
    "1",
    "-1",
    str(2**63 - 1),
    str(2**63),
    str(2**64),
    "9" * 40,
    "١٢٣",  # Arabic-Indic digits
    "１２",  # full-width digits
    "1e3",
    "0x10",
    " 7 ",
    "",
    "..",
    "../..",
    "..%2F..%2Fpublic",
    "%2e%2e",
    "a/b",
    "/mail",
    "a//b",
    "a#b",
    "a?b=c",
    "a%b",
    "%00",
    "\x00",
    "a\x00b",
    "é",
    "💥",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "x" * 256,
    "x" * 5000,
    "null",
    "None",
    "true",
    QUEUE,
]
#: Query and form names the dashboard's views read, and one none does.
FIELDS = [
    "state",
    "queue",
    "job",
    "q",
    "before",
    "after",
    "calls_after",
    "semaphores_after",
    "parent",
    "status",
    selection_views.FIELD,
    "unknown",
]

text = st.one_of(st.sampled_from(NASTY), st.text(max_size=40))


def snapshot(engine: sa.Engine) -> dict[str, list[tuple[t.Any, ...]]]:
    """Every row of every flask-solidq table, in a stable order."""
    with engine.connect() as connection:
        return {
            table.name: sorted(
                (tuple(map(repr, row)) for row in connection.execute(sa.select(table))),
            )
            for table in models.TABLES
        }


@pytest.fixture
def seeded(app: Flask) -> sa.Engine:
    """A failed job, a ready one, a scheduled one, a batch's job and a paused queue."""
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
    dashboard_tests.failed_job(app, engine, "failed", queue=QUEUE)
    enqueue(app, jobs.task, "ready", queue=QUEUE)
    enqueue(app, jobs.task, "later", queue=QUEUE, wait=3600)
    with app.app_context():
        with support.solidq.batch():
            jobs.other.perform_later("in a batch")
        support.solidq.pause("paused-queue")
    return engine


# The dashboard.


#: A method, a path, and the fields of its query string or form.
Request = tuple[str, str, dict[str, list[str]]]

#: A rule's variable: ``<converter(arguments):name>``, or ``<name>``.
VARIABLE = re.compile(r"<(?:(\w+)(?:\(([^)]*)\))?:)?(\w+)>")


@st.composite
def requests(draw: st.DrawFn, rules: list[t.Any]) -> Request:
    """A method, a path (its parts quoted, or raw) and the fields of a query string or a
    form. An ``any(...)`` part is one of its words or any text."""
    rule = draw(st.sampled_from(rules))
    quoted = draw(st.booleans())

    def part(match: re.Match[str]) -> str:
        converter, arguments = match.group(1), match.group(2)
        choices = text
        if converter == "any" and arguments:
            words = [word.strip() for word in arguments.split(",")]
            choices = st.one_of(st.sampled_from(words), text)
        value = draw(choices)
        return quote(value, safe="") if quoted else value

    path = VARIABLE.sub(part, rule.rule)
    fields = draw(
        st.dictionaries(st.sampled_from(FIELDS), st.lists(text, min_size=1, max_size=3), max_size=4)
    )
    method = "POST" if "POST" in rule.methods else "GET"
    return method, path, fields


def dashboard_rules(app: Flask) -> list[t.Any]:
    return [rule for rule in app.url_map.iter_rules() if rule.endpoint.startswith("solidq_")]


def check_request(
    client: FlaskClient, engine: sa.Engine, token: str, request: Request, with_token: bool
) -> None:
    """Send ``request``; no 5xx, nothing changed if it was refused. (In testing mode an
    exception in a view reaches the test client, which raises it: the traceback a user would
    get. A page may show a traceback as data: a failed job's backtrace.)"""
    method, path, fields = request
    before = snapshot(engine)
    if method == "GET":
        # A raw "?" in the path starts its query string, as a browser sends it.
        response = client.get(path, query_string=None if "?" in path else fields)
    else:
        form = {**fields, **({csrf.FIELD: [token]} if with_token else {})}
        response = client.post(path, data=form)
    label = f"{method} {path!r} {fields}: {response.status_code}"
    assert response.status_code < 500, label
    if response.status_code >= 400:
        assert snapshot(engine) == before, f"{label} changed what it refused"


def test_no_dashboard_request_answers_5xx_or_changes_what_it_refused(app, seeded) -> None:
    client: FlaskClient = app.test_client()
    token = dashboard_tests.csrf_token(client)
    rules = dashboard_rules(app)
    # Every route with each nasty value in every part of its path, with the token.
    for rule in rules:
        method = "POST" if "POST" in rule.methods else "GET"
        for value in NASTY if rule.arguments else [""]:
            path = VARIABLE.sub(quote(value, safe="").replace("\\", "\\\\"), rule.rule)
            check_request(client, seeded, token, (method, path, {}), with_token=True)
    # Then drawn paths, queries and forms, a share of the examples for each route.
    for rule in rules:

        @per_target(len(rules))
        @given(request=requests([rule]), with_token=st.booleans())
        def check(request: Request, with_token: bool) -> None:
            check_request(client, seeded, token, request, with_token)

        check()


# The CLI.

#: Commands left out: ``work`` serves until stopped, ``install`` writes migration files.
SKIPPED = {"work", "install"}


def cli_commands(app: Flask) -> dict[str, t.Any]:
    group = t.cast(click.Group, app.cli.get_command(click.Context(app.cli), "solidq"))
    context = click.Context(group)
    return {
        name: group.get_command(context, name)
        for name in group.list_commands(context)
        if name not in SKIPPED
    }


@st.composite
def invocations(draw: st.DrawFn, commands: dict[str, t.Any], output: str) -> list[str]:
    """``solidq COMMAND`` with drawn arguments and options of its own, and maybe a stray one."""
    name = draw(st.sampled_from(sorted(commands)))
    command = commands[name]
    words = ["solidq", name]
    for parameter in command.params:
        if isinstance(parameter, click.Argument):
            count = 1 if parameter.nargs == 1 else draw(st.integers(0, 3))
            words += [draw(text) for _ in range(count)]
        elif draw(st.booleans()):
            option = parameter.opts[-1]
            if parameter.name == "output":
                words += [option, output]
            elif parameter.is_flag:
                words.append(option)
            else:
                words += [option, draw(text)]
    if draw(st.integers(0, 9)) == 0:
        words.append(draw(st.sampled_from(["--unknown", "extra", "--yes"])))
    return words


def check_invocation(runner: t.Any, engine: sa.Engine, words: list[str]) -> None:
    """Run ``flask *words``; no exception escaped (the traceback a user would see), nothing
    changed if it exited non-zero."""
    before = snapshot(engine)
    result = runner.invoke(args=words, input="")
    label = f"flask {' '.join(map(repr, words))}: exit {result.exit_code}\n{result.output}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(label) from result.exception
    if result.exit_code != 0:
        assert snapshot(engine) == before, f"{label} changed what it refused"


def test_no_cli_command_gives_a_traceback_or_changes_what_it_refused(app, seeded, tmp_path) -> None:
    runner = app.test_cli_runner()
    commands = cli_commands(app)
    # Every command with each nasty value as its argument, with ``--yes`` where it asks.
    for name, command in commands.items():
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        if not arguments:
            continue
        yes = ["--yes"] if any(p.name == "yes" for p in command.params) else []
        for value in NASTY:
            check_invocation(runner, seeded, ["solidq", name, *yes, value])
    # Then drawn arguments and options, a share of the examples for each command.
    for command in commands.values():

        @per_target(len(commands))
        @given(words=invocations({command.name: command}, str(tmp_path / "metrics.txt")))
        def check(words: list[str]) -> None:
            check_invocation(runner, seeded, words)

        check()
