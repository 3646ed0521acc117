"""The processes page's buttons: quiet a process (it claims no more jobs and finishes the
ones it runs) or stop it (gracefully, and its supervisor doesn't restart it), through
:mod:`flask_solidq.operations.process_commands`, as ``flask solidq quiet``/``stop`` do. Each
is a POST with the dashboard's CSRF token that redirects back to the page, saying what it
did, or why it didn't (the process is gone, or already stopping)."""

from __future__ import annotations

import typing as t

from flask import Blueprint
from flask import url_for

from flask_solidq.dashboard import flash
from flask_solidq.dashboard import params
from flask_solidq.dashboard import reading
from flask_solidq.errors import ProcessCommandRefused
from flask_solidq.operations import process_commands
from flask_solidq.operations.process_commands import ProcessCommand

if t.TYPE_CHECKING:
    from werkzeug.wrappers import Response


def add_routes(blueprint: Blueprint) -> None:
    """Add ``.process_action``: ``POST /processes/<id>/quiet`` and ``.../stop``."""
    blueprint.add_url_rule(
        # Any text, so a bad id answers 400 with a message (params.record_id), not 404.
        "/processes/<process_id>/<any(quiet, stop):action>",
        "process_action",
        process_action,
        methods=["POST"],
    )


def process_action(process_id: str, action: str) -> Response:
    """Give the process its command; back to the processes page, which shows it quieting or
    stopping until it has."""
    number = params.record_id(process_id, "process id", "process")
    command = ProcessCommand(action)
    try:
        target = process_commands.give(reading.engine(), number, command)
    except ProcessCommandRefused as error:
        return flash.redirect_saying(url_for(".processes"), str(error))
    message = f"Told {target.kind} {target.name} to {command.value}."
    return flash.redirect_saying(url_for(".processes"), message)
