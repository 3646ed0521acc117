"""The dashboard: a blueprint at ``SOLIDQ_DASHBOARD_URL_PREFIX`` (``/solidq``), Jinja2 pages
with htmx, over the same reads (:mod:`flask_solidq.reads.browse`,
:mod:`~flask_solidq.reads.queue_figures`) and actions (:mod:`~flask_solidq.operations.actions`,
:mod:`~flask_solidq.operations.queues`) the CLI and the Python API use: no SQL of its own.

Closed by default (:mod:`.access`), every action a POST with a signed CSRF token from the
dashboard's own origin (:mod:`.csrf`), every parameter checked before it reaches the database
(:mod:`.params`), every response with a strict Content-Security-Policy (:mod:`.headers`), a
warning when a proxy's https reaches it as http, leaving its cookies without Secure
(:mod:`.proxy`).
Templates are under ``templates/solidq/`` (an app overrides one by putting a file of the same
name in its own templates folder), static files under ``static/solidq/``.
"""

from __future__ import annotations

import typing as t

from flask import Blueprint

from flask_solidq.dashboard import access
from flask_solidq.dashboard import csrf
from flask_solidq.dashboard import flash
from flask_solidq.dashboard import headers
from flask_solidq.dashboard import live
from flask_solidq.dashboard import metrics_view
from flask_solidq.dashboard import missing_tables
from flask_solidq.dashboard import params
from flask_solidq.dashboard import proxy
from flask_solidq.dashboard import views
from flask_solidq.storage.resources import resource_dir

if t.TYPE_CHECKING:
    from flask import Flask

#: The blueprint's name: ``url_for("solidq_dashboard.overview")``.
NAME = "solidq_dashboard"

#: The ``SOLIDQ_*`` keys the dashboard reads itself, beside those of
#: :data:`flask_solidq.config.DEFAULTS`.
SETTINGS = (csrf.SECRET_KEY_SETTING, live.SETTING)


def register(app: Flask, url_prefix: str) -> None:
    """Add the dashboard to ``app`` at ``url_prefix``."""
    csrf.check_setting(app.config)
    live.check_setting(app.config)
    blueprint = Blueprint(
        NAME,
        __name__,
        template_folder=str(resource_dir("templates")),
        static_folder=str(resource_dir("static") / "solidq"),
        static_url_path="/static",
    )
    blueprint.before_request(proxy.check)
    blueprint.before_request(access.check)
    blueprint.before_request(csrf.check)
    blueprint.before_request(params.check)
    blueprint.after_request(csrf.set_cookie)
    blueprint.after_request(flash.forget_shown)
    blueprint.after_request(headers.add)
    blueprint.context_processor(csrf.template_context)
    blueprint.context_processor(live.template_context)
    missing_tables.add_handler(blueprint)
    views.add_routes(blueprint)
    metrics_view.add_routes(blueprint)
    app.register_blueprint(blueprint, url_prefix=url_prefix)
