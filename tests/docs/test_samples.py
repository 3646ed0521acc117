"""Every Python sample of the docs and the README runs, so none can rot.

The samples of one page run in order in one namespace (a later one uses what an earlier one
defined), after the page's preamble (:mod:`tests.docs.preambles`), in an app with flask-solidq
on a real SQLite database of the page's own. A sample that defines ``test_*`` functions has
them called too, their arguments taken from the page's namespace by name. Each test is one
sample, named ``page[index]:line``, so a failure names the block to fix.
"""

from __future__ import annotations

import inspect
import os
import pathlib
import sys
import typing as t
import weakref

import blinker
import pytest
from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from flask_solidq import SolidQ
from flask_solidq import signals
from flask_solidq.controls.rate_limit import named_budgets
from flask_solidq.definitions import registry
from tests.docs import preambles
from tests.docs.samples import Sample
from tests.docs.samples import all_samples

SAMPLES = all_samples()

#: Modules a preamble may replace with a stand-in (a client the docs import), put back after.
STAND_IN_MODULES = ("sentry_sdk", "flask_login")

#: The samples marked not to run. A new one is a decision: count it here.
NOT_RUN = 2


class PageRun:
    """One page's app, namespace and progress; undone by :meth:`close`."""

    def __init__(self, page: str, directory: pathlib.Path) -> None:
        self.page = page
        self.done = 0
        self.registered = dict(registry._definitions)
        # The page's jobs are registered alone: the suite's own (tests.jobs) may share names
        # with them, and a page is a fresh app of a reader's, which has none of those.
        registry._definitions.clear()
        # So are named budgets (rate_limiter.register): a page registers its own.
        self.budgets = dict(named_budgets._budgets)
        named_budgets._budgets.clear()
        self.modules = {name: sys.modules.get(name) for name in STAND_IN_MODULES}
        self.receivers = {signal: set(signal.receivers) for signal in _signals()}
        config, code = preambles.preamble(page)
        db, solidq = SQLAlchemy(), SolidQ()
        app = Flask("docs_sample_app")
        app.config.update(
            SQLALCHEMY_DATABASE_URI=f"sqlite:///{directory}/app.db",
            SECRET_KEY="docs samples",
            TESTING=True,
            **config,
        )
        db.init_app(app)
        solidq.init_app(app)
        self.db = db
        self.context = app.app_context()
        self.context.push()
        self.cwd = os.getcwd()
        os.chdir(directory)  # a sample's relative sqlite:///app.db lands in the page's folder
        name = "docs_sample_" + page.replace("/", "_").replace(".", "_").replace("-", "_")
        self.namespace: dict[str, t.Any] = {
            "__name__": name,
            "app": app,
            "db": db,
            "solidq": solidq,
        }
        exec(compile(code, f"<preamble of {page}>", "exec"), self.namespace)
        db.create_all()
        exec(compile(preambles.ROWS, f"<rows of {page}>", "exec"), self.namespace)

    def run(self, sample: Sample) -> None:
        """Run ``sample`` after the page's earlier samples that haven't run yet."""
        for earlier in samples_of_page(self.page)[self.done : sample.index]:
            self.execute(earlier)
        self.execute(sample)

    def execute(self, sample: Sample) -> None:
        self.done = sample.index + 1
        if sample.not_run:
            return
        setup = preambles.BEFORE.get(self.page, {}).get(sample.index)
        if setup:
            exec(compile(setup, f"<before {sample.id}>", "exec"), self.namespace)
        before = set(self.namespace)
        code = compile(sample.code, f"{sample.page}, block {sample.index}", "exec")
        exec(code, self.namespace)
        for name in sorted(set(self.namespace) - before):
            if name.startswith("test_") and callable(self.namespace[name]):
                self.call_test(self.namespace[name])

    def call_test(self, function: t.Callable[..., object]) -> None:
        """A sample's test, given the namespace's values of its parameters' names."""
        names = inspect.signature(function).parameters
        function(**{name: self.namespace[name] for name in names})

    def close(self) -> None:
        self.db.session.remove()
        self.context.pop()
        os.chdir(self.cwd)
        registry._definitions.clear()
        registry._definitions.update(self.registered)
        named_budgets._budgets.clear()
        named_budgets._budgets.update(self.budgets)
        for name, module in self.modules.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        self.disconnect_receivers()

    def disconnect_receivers(self) -> None:
        """Disconnect what the page's samples connected to the signals: a sample's receiver
        is connected weakly, but the page's namespace holds it in a reference cycle, so it
        lives until the garbage collector's next full pass, and would hear later tests'
        sends until then."""
        for signal, before in self.receivers.items():
            for receiver_id in set(signal.receivers) - before:
                receiver = signal.receivers.get(receiver_id)
                target = receiver() if isinstance(receiver, weakref.ref) else receiver
                if target is not None:
                    signal.disconnect(target)


def _signals() -> list[t.Any]:
    """flask-solidq's signals."""
    return [value for value in vars(signals).values() if isinstance(value, blinker.NamedSignal)]


def samples_of_page(page: str) -> list[Sample]:
    return [sample for sample in SAMPLES if sample.page == page]


class Runs:
    """The page being run: a sample of another page closes it and starts that page's."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.current: PageRun | None = None

    def of(self, page: str) -> PageRun:
        if self.current is None or self.current.page != page:
            self.close()
            self.current = PageRun(page, self.factory.mktemp("docs"))
        return self.current

    def close(self) -> None:
        if self.current is not None:
            current, self.current = self.current, None
            current.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Runs]:
    pages = Runs(tmp_path_factory)
    yield pages
    pages.close()


#: The samples each test runs (the marked ones are counted below, never skipped: CI fails on a
#: skipped test).
RUN = [sample for sample in SAMPLES if not sample.not_run]


@pytest.mark.parametrize("sample", RUN, ids=[sample.id for sample in RUN])
def test_sample_runs(sample: Sample, runs: Runs) -> None:
    runs.of(sample.page).run(sample)


def test_the_samples_not_run_are_the_few_counted() -> None:
    marked = [sample.id for sample in SAMPLES if sample.not_run]
    assert len(marked) == NOT_RUN, marked


def test_every_page_with_python_has_samples_found() -> None:
    """The collector sees the README's quickstart and the feature pages' samples."""
    pages = {sample.page for sample in SAMPLES}
    assert {"README.md", "docs/quickstart.md", "docs/coalescing.md"} <= pages
