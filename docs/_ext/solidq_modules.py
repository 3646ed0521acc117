"""The architecture page's module map, drawn from the code at each build: the layers of
``pyproject.toml``'s import-linter contract (the ones ``make lint`` holds), and under each the
modules of its units with their lines and the first sentence of their docstrings, then the
figures a reader checks the layout by (modules at the top, the largest, those over 400 lines).

A unit of the package that no layer names is a warning, and ``make docs`` fails on warnings:
the map cannot leave a module out, nor go stale.
"""

from __future__ import annotations

import ast
import pathlib
import re
import statistics

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

import flask_solidq

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: Sphinx brings tomli there
    import tomli as tomllib

PACKAGE = pathlib.Path(flask_solidq.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"
#: A module over this many lines is named in the figures.
LONG_MODULE = 400
SENTENCE = re.compile(r"(.+?[.:;])(\s|$)", re.DOTALL)


def layers() -> list[list[str]]:
    """The layers contract's layers, top first, each as its units' names."""
    config = tomllib.loads(PYPROJECT.read_text("utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["type"] == "layers"]
    return [re.split(r"\s*[|:]\s*", layer.strip()) for layer in contract["layers"]]


def units() -> set[str]:
    """The package's units: its top-level modules and packages."""
    found = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    found |= {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    return found


def modules_of(unit: str) -> list[pathlib.Path]:
    """The files of ``unit``: one module, or every module of its package."""
    single = PACKAGE / f"{unit}.py"
    if single.exists():
        return [single]
    return sorted((PACKAGE / unit).rglob("*.py"))


def summary(path: pathlib.Path) -> str:
    """The first sentence of the module's docstring, on one line."""
    docstring = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
    text = " ".join(docstring.split())
    match = SENTENCE.match(text)
    return (match.group(1) if match else text).replace("|", "\\|")


def line_count(path: pathlib.Path) -> int:
    return len(path.read_text("utf-8").splitlines())


def map_lines() -> tuple[list[str], set[str]]:
    """The map as MyST lines, and the units no layer names."""
    lines: list[str] = []
    named: set[str] = set()
    for number, layer in enumerate(layers(), start=1):
        named |= set(layer)
        lines += [f"**Layer {number}**: {', '.join(f'`{unit}`' for unit in layer)}", ""]
        lines += ["| module | lines | what it holds |", "|---|---:|---|"]
        for unit in layer:
            for path in modules_of(unit):
                name = path.relative_to(PACKAGE).as_posix()
                lines.append(f"| `{name}` | {line_count(path)} | {summary(path)} |")
        lines.append("")
    return lines, units() - named


def figure_lines() -> list[str]:
    """How many modules, how long, how many at the top, which over :data:`LONG_MODULE`."""
    paths = sorted(PACKAGE.rglob("*.py"))
    sizes = {path.relative_to(PACKAGE).as_posix(): line_count(path) for path in paths}
    long = sorted((name for name, size in sizes.items() if size > LONG_MODULE), key=sizes.get)
    largest = max(sizes, key=lambda name: sizes[name])
    top = [path for path in PACKAGE.glob("*.py") if path.stem != "__init__"]
    return [
        f"{len(sizes)} modules, {sum(sizes.values())} lines; median"
        f" {statistics.median(sizes.values()):g} lines, the largest `{largest}`"
        f" ({sizes[largest]}); {len(top)} modules at the top of the package;"
        f" {len(layers())} layers. Over {LONG_MODULE} lines: "
        + (", ".join(f"`{name}` ({sizes[name]})" for name in long) or "none")
        + ".",
        "",
    ]


class ModuleMap(SphinxDirective):
    """``{solidq-module-map}``: the layers and their modules, then the figures."""

    def run(self) -> list[nodes.Node]:
        lines, unnamed = map_lines()
        for unit in sorted(unnamed):
            self.reporter.warning(f"flask_solidq.{unit} is in no layer of pyproject.toml.")
        container = nodes.container()
        source = self.get_source_info()[0]
        text = StringList([*figure_lines(), *lines], source=source)
        self.state.nested_parse(text, 0, container)
        return container.children


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("solidq-module-map", ModuleMap)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
