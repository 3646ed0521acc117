"""The configuration reference's list: the keys and defaults come from the code
(``flask_solidq.config.DEFAULTS``, and every ``"SOLIDQ_..."`` name the package reads), the
meanings from the page. A key the code reads that the page doesn't explain, or one the page
explains that the code no longer reads, is a warning, and ``make docs`` fails on warnings: the
reference cannot drift."""

from __future__ import annotations

import pathlib
import re

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

import flask_solidq
from flask_solidq.config import DEFAULTS

KEY = re.compile(r'"(SOLIDQ_[A-Z_]+)"')
ENTRY = re.compile(r"^`(SOLIDQ_[A-Z_]+)`:\s*(.*)$")


def keys_the_code_reads() -> dict[str, object]:
    """Every key with its default; one read with ``config.get`` alone defaults to None."""
    package = pathlib.Path(flask_solidq.__file__).parent
    found = {key for path in package.rglob("*.py") for key in KEY.findall(path.read_text("utf-8"))}
    return {key: DEFAULTS.get(key) for key in sorted(found | set(DEFAULTS))}


def entries(lines: list[str]) -> dict[str, str]:
    """The body's "`KEY`: meaning" entries; a meaning may go on over indented lines."""
    meanings: dict[str, str] = {}
    last = None
    for line in lines:
        match = ENTRY.match(line)
        if match:
            last = match.group(1)
            meanings[last] = match.group(2)
        elif line.strip() and last:
            meanings[last] += " " + line.strip()
    return meanings


class ConfigKeys(SphinxDirective):
    """``{solidq-config-keys}``: each key, its default (from the code) and meaning (the body)."""

    has_content = True

    def run(self) -> list[nodes.Node]:
        meanings = entries(list(self.content))
        defaults = keys_the_code_reads()
        for key in sorted(set(defaults) - set(meanings)):
            self.reporter.warning(f"{key} is read by flask_solidq but not explained here.")
        for key in sorted(set(meanings) - set(defaults)):
            self.reporter.warning(f"{key} is explained here but flask_solidq doesn't read it.")
        lines = []
        for key, meaning in meanings.items():
            if key in defaults:
                lines += [f"`{key}`", f": Default `{defaults[key]!r}`: {meaning}", ""]
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), 0, container)
        return container.children


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("solidq-config-keys", ConfigKeys)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
