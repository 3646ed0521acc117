"""The Python samples of the docs and the README, as the tests execute them.

A sample is a ```python block of ``docs/**/*.md`` or ``README.md``. One that is deliberately
not runnable (it shows what mypy says of wrong calls, say) carries the marker
``<!-- sample: not run, REASON -->`` on the line before its fence: it is collected and counted
all the same, and skipped with its reason, so the few there are stay visible in every run.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

ROOT = pathlib.Path(__file__).parents[2]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
NOT_RUN = re.compile(r"<!-- sample: not run, (.+?) -->\s*$")


@dataclasses.dataclass(frozen=True)
class Sample:
    """One ```python block: its page (relative to the repository), index on the page, line."""

    page: str
    index: int
    line: int
    code: str
    not_run: str | None

    @property
    def id(self) -> str:
        return f"{self.page}[{self.index}]:{self.line}"


def pages() -> list[pathlib.Path]:
    """README.md and every Markdown page of docs/ (its build output left out)."""
    found = sorted(path for path in (ROOT / "docs").rglob("*.md") if "_build" not in path.parts)
    return [ROOT / "README.md", *found]


def samples_of(path: pathlib.Path) -> list[Sample]:
    """The page's ```python blocks in order."""
    text = path.read_text("utf-8")
    page = path.relative_to(ROOT).as_posix()
    found = []
    for match in FENCE.finditer(text):
        if match.group(1) != "python":
            continue
        before = text[: match.start()]
        marker = NOT_RUN.search(before.rstrip("\n").rsplit("\n", 1)[-1] + "\n")
        found.append(
            Sample(
                page=page,
                index=len(found),
                line=before.count("\n") + 1,
                code=match.group(2),
                not_run=marker.group(1) if marker else None,
            )
        )
    return found


def all_samples() -> list[Sample]:
    return [sample for path in pages() for sample in samples_of(path)]
