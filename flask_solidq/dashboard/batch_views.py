"""The dashboard's batch pages: the batches, newest first, each with its progress, and one
batch with its counters, times, metadata, callbacks and its jobs by state. They read through
:mod:`flask_solidq.reads.batches` (a batch's jobs through the same query as the jobs pages),
a page at a time, keyset-paginated (``?before=``, the last id of the previous page). A
batch's page links its parent, lists its first children, and offers to retry its failed jobs
or discard its pending ones (its children's included).

The progress bar is drawn server-side as SVG rectangles whose widths are attributes: the
Content-Security-Policy (:mod:`.headers`) allows no inline style, so a ``style="width:..."``
bar would be dropped, and the page needs no script for it.
"""

from __future__ import annotations

import dataclasses
import typing as t

from flask import Blueprint
from flask import abort
from flask import render_template
from flask import request
from flask import url_for

from flask_solidq.dashboard import flash
from flask_solidq.dashboard import params
from flask_solidq.dashboard import reading
from flask_solidq.definitions.batches import Batch
from flask_solidq.formatting import describe_metadata
from flask_solidq.formatting import format_age
from flask_solidq.operations import actions
from flask_solidq.reads import batches
from flask_solidq.reads import browse
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from werkzeug.wrappers import Response

#: Batches per page of the list.
PAGE_SIZE = 50
#: Jobs per state on a batch's page; a state's own page (``?state=``) lists 50 at a time.
GROUP_SIZE = 10
STATE_PAGE_SIZE = 50
#: Children on a batch's page; the rest are on the batches list's ``?parent=`` pages.
CHILDREN_SIZE = 50


def add_routes(blueprint: Blueprint) -> None:
    """Add the pages, ``.batches`` and ``.batch``, and a batch's actions, ``.batch_action``."""
    blueprint.add_url_rule("/batches", "batches", batches_page)
    # Any text, so a bad id answers 400 with a message (params.record_id), not 404.
    blueprint.add_url_rule("/batches/<batch_id>", "batch", batch_page)
    blueprint.add_url_rule(
        "/batches/<batch_id>/<any(retry, discard):action>",
        "batch_action",
        batch_action,
        methods=["POST"],
    )


@dataclasses.dataclass(frozen=True)
class Progress:
    """A batch's bar: each counter's share of its jobs, in percent (all 0 for an empty
    batch), and where each segment starts."""

    completed: float
    failed: float
    pending: float

    @property
    def failed_x(self) -> float:
        return self.completed

    @property
    def pending_x(self) -> float:
        return round(self.completed + self.failed, 2)


def progress(batch: Batch) -> Progress:
    """The shares of ``batch``'s completed, failed and pending jobs."""
    total = batch.total_jobs or 1
    share = [round(100 * count / total, 2) for count in _counters(batch)]
    return Progress(*share) if batch.total_jobs else Progress(0.0, 0.0, 0.0)


def _counters(batch: Batch) -> tuple[int, int, int]:
    return batch.completed_jobs, batch.failed_jobs, batch.pending_jobs


def batches_page() -> str:
    """A page of batches, newest first, optionally only the open, finished or failed ones,
    or only the children of one (``?parent=``)."""
    status = _status()
    text = request.args.get("parent") or None
    parent = None if text is None else params.record_id(text, "parent batch id")
    before = params.int_cursor("before")
    with reading.page() as connection:
        page = batches.list_batches(
            connection, status=status, parent=parent, before=before, limit=PAGE_SIZE
        )
    now = utcnow()
    return render_template(
        "solidq/batches.html",
        page=page,
        status=status,
        parent=parent,
        statuses=list(batches.BatchFilter),
        before=before,
        next_before=page[-1].id if len(page) == PAGE_SIZE else None,
        progress=progress,
        summary=describe_metadata,
        age=lambda moment: format_age(moment, now) if moment else "-",
        now=now,
        done=params.done(),
    )


def batch_page(batch_id: str) -> str:
    """One batch whole, and a page of its jobs in each state; ``?state=`` lists one state
    alone, a page at a time."""
    number = params.record_id(batch_id, "batch id")
    state = _job_state()
    before = params.int_cursor("before")
    states = [state] if state else batches.JOB_STATES
    size = STATE_PAGE_SIZE if state else GROUP_SIZE
    with reading.page() as connection:
        batch = batches.find_batch(connection, number)
        if batch is None:
            abort(404)
        groups = batches.job_groups(connection, number, states=states, before=before, limit=size)
        children = batches.list_batches(connection, parent=number, limit=CHILDREN_SIZE)
        offers = batches.actionable(connection, batch)
    now = utcnow()
    return render_template(
        "solidq/batch.html",
        batch=batch,
        bar=progress(batch),
        groups=groups,
        children=children,
        more_children=children[-1].id if len(children) == CHILDREN_SIZE else None,
        offers=offers,
        progress=progress,
        summary=describe_metadata,
        state=state,
        states=batches.JOB_STATES,
        before=before,
        age=lambda moment: format_age(moment, now) if moment else "-",
        now=now,
        done=params.done(),
    )


def batch_action(batch_id: str, action: str) -> Response:
    """Retry the failed jobs of a batch and its descendants (a finished one reopens), or
    discard their scheduled, blocked and ready jobs (so it can finish); back to its page,
    saying how many. An unknown batch is 404, as its page is."""
    number = params.record_id(batch_id, "batch id")
    with reading.page() as connection:
        if batches.find_batch(connection, number) is None:
            abort(404)
    filters = actions.Filters(batch=number)
    engine = reading.engine()
    if action == "retry":
        count, what = actions.retry_all(engine, filters), "Retried {} failed job{}"
    else:
        count, what = actions.discard_pending(engine, filters), "Discarded {} pending job{}"
    message = what.format(count, "" if count == 1 else "s") + f" of batch {number}."
    return flash.redirect_saying(url_for(".batch", batch_id=number), message)


def _status() -> batches.BatchFilter | None:
    """The list's ``?status=``: absent or empty is every batch; another word is 404."""
    text = request.args.get("status") or None
    try:
        return None if text is None else batches.BatchFilter(text)
    except ValueError:
        abort(404)


def _job_state() -> browse.State | None:
    """A batch page's ``?state=``: absent or empty is every state; another word is 404."""
    text = request.args.get("state") or None
    try:
        return None if text is None else browse.State(text)
    except ValueError:
        abort(404)
