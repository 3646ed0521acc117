"""Type checkers see a job definition's signature: mypy (the installed one, in strict mode)
passes the samples in tests/typing/ that use jobs correctly, and reports every line of the
misused sample that's marked ``# E: <error code>``, with that code, and nothing else.

No database: the samples are type-checked, never run.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest

from tests.support import processes

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "typing"
CORRECT = SAMPLES / "jobs_used_correctly.py"
MISUSED = SAMPLES / "jobs_misused.py"

#: ``tests/typing/jobs_misused.py:27: error: Argument 1 has ...  [arg-type]``
_ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")
_MARKER = re.compile(r"#\s*E:\s*(?P<code>[a-z-]+)\s*$")


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[tuple[int, str]]]:
    """mypy's errors in both samples, as (line, error code) by file name: one run, with
    the project's settings ([tool.mypy]: strict) and a cache of its own."""
    cache = tmp_path_factory.mktemp("mypy_cache")
    result = processes.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), str(CORRECT), str(MISUSED)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    summary = result.stdout.strip().splitlines()[-1:]
    assert summary and summary[0].startswith(("Success:", "Found ")), (
        f"mypy didn't check the samples (exit {result.returncode}):\n{result.stdout}\n"
        f"{result.stderr}"
    )
    errors: dict[str, set[tuple[int, str]]] = {CORRECT.name: set(), MISUSED.name: set()}
    for line in result.stdout.splitlines():
        match = _ERROR.match(line)
        if match:
            errors[pathlib.Path(match["path"]).name].add((int(match["line"]), match["code"]))
    return errors


def expected_errors(sample: pathlib.Path) -> set[tuple[int, str]]:
    """The (line, error code) of each line of ``sample`` marked ``# E: <code>``."""
    lines = sample.read_text().splitlines()
    found = ((number, _MARKER.search(text)) for number, text in enumerate(lines, start=1))
    return {(number, match["code"]) for number, match in found if match}


def test_jobs_used_correctly_type_check(reported: dict[str, set[tuple[int, str]]]) -> None:
    assert reported[CORRECT.name] == set()


def test_each_wrong_call_is_a_type_error(reported: dict[str, set[tuple[int, str]]]) -> None:
    expected = expected_errors(MISUSED)
    assert len(expected) >= 15  # perform_later, new, perform_now, set(...), the call itself
    assert reported[MISUSED.name] == expected
