"""The jobs list's selected rows: retry or discard the jobs whose boxes are checked, beside
the list's "all (filtered)" actions. What each list offers follows what the actions allow
(:mod:`flask_solidq.operations.actions`): a failed job can be retried or discarded, a
waiting one (scheduled, deferred, ready, blocked) discarded; a running or finished one
neither, so their lists have no boxes.

The ids come from one page (at most :data:`~flask_solidq.operations.actions.BATCH_SIZE`), so
each action is one transaction; a job that left the list's state meanwhile (a worker ran it,
someone retried it) is left alone and counted as such in what the page then says.
"""

from __future__ import annotations

import typing as t

from flask import Blueprint
from flask import request
from flask import url_for

from flask_solidq.dashboard import flash
from flask_solidq.dashboard import params
from flask_solidq.dashboard import reading
from flask_solidq.operations import actions
from flask_solidq.reads import browse

if t.TYPE_CHECKING:
    from werkzeug.wrappers import Response

#: The form field of a checked row (repeated), holding its job's id.
FIELD = "job_id"

_State = browse.State
#: Per list, the actions its selected rows can take.
ACTIONS: dict[browse.State, tuple[str, ...]] = {
    _State.FAILED: ("retry", "discard"),
    _State.SCHEDULED: ("discard",),
    _State.DEFERRED: ("discard",),
    _State.READY: ("discard",),
    _State.BLOCKED: ("discard",),
}
#: The execution a list's jobs have, which a discard takes them from.
_WAITING = {
    _State.FAILED: actions.Waiting.FAILED,
    _State.SCHEDULED: actions.Waiting.SCHEDULED,
    _State.DEFERRED: actions.Waiting.SCHEDULED,
    _State.READY: actions.Waiting.READY,
    _State.BLOCKED: actions.Waiting.BLOCKED,
}
_DONE = {"retry": "Retried", "discard": "Discarded"}


def add_routes(blueprint: Blueprint) -> None:
    blueprint.add_url_rule(
        "/selected/<any(retry, discard):action>",
        "selected_action",
        selected_action,
        methods=["POST"],
    )


def selected_action(action: str) -> Response:
    """Retry or discard the selected jobs of one list; back to that list (its filters, search
    and page kept), saying how many were, and how many no longer were in its state."""
    state = _list_state(action)
    ids = params.selected_ids(FIELD, most=actions.BATCH_SIZE)
    back = _list_url(state)
    if not ids:
        return flash.redirect_saying(back, "No job selected: nothing done.")
    engine = reading.engine()
    if action == "retry":
        count = actions.retry(engine, ids)
    else:
        count = actions.discard_in(engine, _WAITING[state], ids)
    return flash.redirect_saying(back, said(action, count, len(ids), state))


def said(action: str, count: int, selected: int, state: browse.State) -> str:
    """ "Retried 2 jobs; 1 was no longer failed." """
    message = f"{_DONE[action]} {count} job{'s' if count != 1 else ''}"
    missed = selected - count
    if missed:
        verb = "was" if missed == 1 else "were"
        message += f"; {missed} {verb} no longer {state.value}"
    return message + "."


def _list_state(action: str) -> browse.State:
    """The state of the list the form came from, which must offer ``action``, or 400."""
    text = request.form.get("state", "")
    state = next((member for member in _State if member.value == text), None)
    if state is None or action not in ACTIONS.get(state, ()):
        params.refuse(f"The {params.shown(text)} jobs list has no {action} of selected jobs.")
    return state


def _list_url(state: browse.State) -> str:
    """The list the form came from: its filters, search and page, from the form's fields
    (``url_for`` puts them in the query string of a dashboard path: nothing leaves it)."""
    form = request.form
    before = form.get("before") or None
    return url_for(
        ".jobs",
        state=state.value,
        queue=form.get("queue") or None,
        job=form.get("job") or None,
        q=form.get("q") or None,
        before=params.job_id(before, name="cursor 'before'") if before else None,
    )
