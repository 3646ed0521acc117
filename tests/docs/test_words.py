"""The documentation speaks to users: no words from the project's own specification (its
source documents, their numbers), and the table count it states is the models' count."""

from __future__ import annotations

import pathlib
import re

from flask_solidq.models.base import Base

ROOT = pathlib.Path(__file__).parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs").glob("*/*.md")])
#: Words that only mean something inside the project: the specification's source documents
#: ("the seed's", "seed 003") and references to its private contract files.
INTERNAL = re.compile(r"(?i:\bseed(?:'s| \d+)|\bthe seeds\b)|\b(?:API|DESIGN|STYLE)\.md\b")
NUMBERS = {"Fifteen": 15, "Sixteen": 16, "Seventeen": 17, "Eighteen": 18, "Nineteen": 19}


def test_no_page_uses_the_specification_s_internal_words():
    found = [
        f"{page.name}:{number}: {line.strip()}"
        for page in PAGES
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if INTERNAL.search(line)
    ]
    assert found == []


def test_the_tables_page_counts_the_tables_there_are():
    text = (ROOT / "docs" / "tables.md").read_text(encoding="utf-8")
    opening = text.split("# Tables", 1)[1].split()[0]
    assert NUMBERS.get(opening) == len(Base.metadata.tables), opening
