"""``GET <prefix>/metrics``: the queue's figures for Prometheus (:mod:`flask_solidq.reads.metrics`),
behind the dashboard's own access check, so a scraper authenticates as a person would (HTTP
Basic in its ``basic_auth`` settings, or whatever ``@solidq.dashboard_auth`` accepts)."""

from __future__ import annotations

import typing as t

import sqlalchemy as sa
from flask import Response
from flask import request

from flask_solidq.dashboard import missing_tables
from flask_solidq.dashboard import reading
from flask_solidq.errors import PendingMigrations
from flask_solidq.processes.outage import describe
from flask_solidq.reads import metrics
from flask_solidq.state import get_state

if t.TYPE_CHECKING:
    from flask import Blueprint


def add_routes(blueprint: Blueprint) -> None:
    blueprint.add_url_rule("/metrics", "metrics", metrics_page)


def metrics_page() -> Response:
    """The figures in the format the scraper asks for; 501 naming the extra to install when
    prometheus_client is missing, 503 when the database can't be reached or lacks the
    tables (the scrape fails, and says why and what fixes it, rather than reporting nothing)."""
    settings = get_state().settings
    try:
        body, content_type = metrics.exposition(
            reading.page,
            threshold=settings.process_alive_threshold,
            max_queues=settings.metrics_max_queues,
            accept=request.headers.get("Accept"),
        )
    except metrics.MetricsUnavailable as error:
        return Response(str(error), status=501, mimetype="text/plain")
    except PendingMigrations as error:
        return Response(missing_tables.summary(error), status=503, mimetype="text/plain")
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as error:
        message = f"Can't reach the queue's database: {describe(error)}"
        return Response(message, status=503, mimetype="text/plain")
    return Response(body, content_type=content_type)
