"""Sphinx settings of the documentation site (``make docs``): the Pallets theme Flask and
Flask-SQLAlchemy use, Markdown pages through MyST, the CLI reference from click's own
definitions and the API reference from the docstrings, so neither can drift from the code."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent / "_ext"))
sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))

import flask_solidq  # noqa: E402

project = "flask-solidq"
copyright = "flask-solidq developers"
release = version = flask_solidq.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx_click",
    "pallets_sphinx_themes",
    "solidq_config",
    "solidq_modules",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]

# The README's links were GitHub's heading slugs: MyST makes the same anchors for every
# heading level, so `page.md#a-heading` links resolve and are checked by -W.
myst_heading_anchors = 6
myst_enable_extensions = ["colon_fence", "deflist"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}

html_theme = "flask"
html_title = f"flask-solidq {release}"
html_context = {"project_links": []}
# Every page carries the whole site's navigation, then its own headings.
html_sidebars = {
    "**": ["navigation.html", "localtoc.html", "relations.html", "searchbox.html"],
}
templates_path = ["_templates"]
html_static_path: list[str] = []
html_show_sourcelink = False
