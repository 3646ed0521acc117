"""Job definitions: the function and class forms, the registry, the control decorators with
their read-back attributes and keys, retry/discard rules, and job instances (API.md sections
2-3; the seeds' limits_rate and coalesce options and keys)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import sys
import textwrap
import types
import uuid

import pytest
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

import flask_solidq
from flask_solidq import Call
from flask_solidq import coalesce
from flask_solidq import current_job
from flask_solidq import discard_on
from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from flask_solidq import retry_on
from flask_solidq.definitions import failure_rules
from flask_solidq.definitions import failures
from flask_solidq.definitions import job_ids
from flask_solidq.definitions import registry
from flask_solidq.definitions.failure_rules import DiscardRule
from flask_solidq.definitions.failure_rules import RetryRule
from flask_solidq.errors import JobNotFound

solidq = flask_solidq.SolidQ()

UTC = dt.timezone.utc


class Base(DeclarativeBase):
    pass


class Account(Base):
    __tablename__ = "definitions_test_accounts"

    id: Mapped[int] = mapped_column(primary_key=True)


class Shop(Base):
    __tablename__ = "definitions_test_shops"

    id: Mapped[int] = mapped_column(primary_key=True)


@pytest.fixture(autouse=True)
def _forget_jobs_defined_by_the_test():
    """Job names are global to the process: unregister whatever a test defined."""
    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.unregister(registry.lookup(name))


# -- @solidq.job ----------------------------------------------------------------------------


def test_bare_job_decorator_returns_a_job_definition_that_calls_the_function():
    @solidq.job
    def add(a, b=0):
        return a + b

    assert issubclass(add, flask_solidq.Job)
    assert add(1, b=2) == 3
    assert add.queue_name == "default"
    assert add.priority == 0
    for method in ("perform_later", "perform_now", "set", "new"):
        assert callable(getattr(add, method))


def test_job_name_is_the_functions_qualname_unless_name_is_given():
    @solidq.job
    def unnamed():
        pass

    @solidq.job(name="reindex")
    def named():
        pass

    assert unnamed.job_name == unnamed.__qualname__
    assert unnamed.job_name.endswith("<locals>.unnamed")
    assert named.job_name == "reindex"
    assert registry.lookup(unnamed.job_name) is unnamed
    assert registry.lookup("reindex") is named


def test_job_decorator_with_options_sets_queue_priority_and_name():
    @solidq.job(queue="low", priority=5, name="options.job")
    def work(x):
        return x * 2

    assert work.queue_name == "low"
    assert work.priority == 5
    assert work.job_name == "options.job"
    assert work(4) == 8
    assert work.__doc__ is None
    assert work.__wrapped__(3) == 6


def test_job_decorator_keeps_the_functions_module_qualname_and_doc():
    @solidq.job
    def documented():
        """Reindex it."""

    assert documented.__module__ == __name__
    assert documented.__qualname__.endswith("documented")
    assert documented.__doc__ == "Reindex it."


@pytest.mark.parametrize(
    "options, error",
    [
        ({"queue": 5}, TypeError),
        ({"queue": ""}, TypeError),
        ({"queue": "q" * 256}, ValueError),
        ({"priority": "high"}, TypeError),
        ({"priority": 1.5}, TypeError),
        ({"priority": True}, TypeError),
        ({"name": ""}, TypeError),
    ],
)
def test_job_decorator_refuses_invalid_options(options, error):
    def work():
        pass

    with pytest.raises(error):
        solidq.job(**options)(work)


def test_job_decorator_refuses_a_class():
    class NotAFunction:
        pass

    with pytest.raises(TypeError, match="function"):
        solidq.job(NotAFunction)


# -- class form ------------------------------------------------------------------------------


def test_subclassing_job_registers_the_class_under_its_qualname():
    class SyncStripeJob(solidq.Job):
        queue_name = "stripe"
        priority = 3

        def perform(self, account_id):
            return account_id

    assert SyncStripeJob.job_name == SyncStripeJob.__qualname__
    assert registry.lookup(SyncStripeJob.job_name) is SyncStripeJob
    assert SyncStripeJob.queue_name == "stripe"
    assert SyncStripeJob.priority == 3


def test_class_keyword_name_sets_the_job_name():
    class Renamed(solidq.Job, name="RenamedJob"):
        pass

    assert Renamed.job_name == "RenamedJob"
    assert registry.lookup("RenamedJob") is Renamed
    assert Renamed.__qualname__ not in registry.names()


def test_abstract_class_is_not_registered_but_its_subclasses_are():
    class ApplicationJob(solidq.Job, abstract=True):
        queue_name = "app"

    class Concrete(ApplicationJob):
        pass

    assert ApplicationJob.job_name not in registry.names()
    assert registry.lookup(Concrete.job_name) is Concrete
    assert Concrete.queue_name == "app"


def test_subclass_gets_its_own_name_not_its_parents():
    class Parent(solidq.Job, name="ParentNamed"):
        pass

    class Child(Parent):
        pass

    assert Child.job_name == Child.__qualname__
    assert registry.lookup("ParentNamed") is Parent


def test_class_with_an_invalid_queue_or_priority_raises_at_definition():
    with pytest.raises(TypeError, match="queue_name"):

        class BadQueue(solidq.Job):
            queue_name = 5

    with pytest.raises(TypeError, match="priority"):

        class BadPriority(solidq.Job):
            priority = "high"


def test_class_with_an_empty_name_raises_type_error():
    with pytest.raises(TypeError, match="name"):

        class Blank(solidq.Job, name="  "):
            pass


# -- registry --------------------------------------------------------------------------------


def test_two_classes_with_one_name_raise_value_error_naming_both_places():
    class FirstPlace(solidq.Job, name="Duplicated"):
        pass

    with pytest.raises(ValueError) as info:

        class SecondPlace(solidq.Job, name="Duplicated"):
            pass

    message = str(info.value)
    assert "'Duplicated'" in message
    assert "FirstPlace" in message
    assert "SecondPlace" in message
    assert __file__ in message
    assert registry.lookup("Duplicated") is FirstPlace


def test_a_function_and_a_class_with_one_name_raise_value_error_naming_both():
    @solidq.job(name="SharedName")
    def shared_function():
        pass

    with pytest.raises(ValueError) as info:

        class SharedClass(solidq.Job, name="SharedName"):
            pass

    assert "shared_function" in str(info.value)
    assert "SharedClass" in str(info.value)


def test_two_functions_with_one_name_raise_value_error():
    @solidq.job(name="same-function-name")
    def first():
        pass

    def second():
        pass

    with pytest.raises(ValueError, match="same-function-name"):
        solidq.job(name="same-function-name")(second)
    assert registry.lookup("same-function-name") is first


def test_registering_the_same_class_again_is_allowed():
    class Twice(solidq.Job, name="RegisteredTwice"):
        pass

    registry.register(Twice)
    registry.register(Twice)
    assert registry.lookup("RegisteredTwice") is Twice


def test_redefining_a_job_at_the_same_import_path_replaces_it():
    def define():
        class Reloaded(solidq.Job, name="ReloadedJob"):
            pass

        return Reloaded

    old = define()
    new = define()
    assert old is not new
    assert registry.lookup("ReloadedJob") is new


def test_a_class_with_a_matching_module_and_qualname_replaces_the_registered_one():
    class Original(solidq.Job, name="ImportPathTwin"):
        pass

    twin = type(
        "Original",
        (solidq.Job,),
        {"__module__": Original.__module__, "__qualname__": Original.__qualname__},
        abstract=True,
    )
    twin.job_name = "ImportPathTwin"
    registry.register(twin)
    assert registry.lookup("ImportPathTwin") is twin


def test_unregister_forgets_the_job():
    class Forgotten(solidq.Job, name="ForgottenJob"):
        pass

    registry.unregister(Forgotten)
    assert "ForgottenJob" not in registry.names()
    with pytest.raises(JobNotFound):
        registry.lookup("ForgottenJob")


@pytest.fixture
def late_module(tmp_path, monkeypatch):
    """A module on sys.path that defines a job and has not been imported yet."""
    module_name = f"solidq_late_module_{uuid.uuid4().hex}"
    (tmp_path / f"{module_name}.py").write_text(
        textwrap.dedent(
            """
            import flask_solidq

            solidq = flask_solidq.SolidQ()


            class LateJob(solidq.Job, name="LateLoadedJob"):
                def perform(self, x):
                    return x + 1


            @solidq.job(name="late_function")
            def late_function(x):
                return x * 10
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield module_name
    sys.modules.pop(module_name, None)


def test_lookup_imports_a_module_that_was_not_imported_yet(late_module):
    assert late_module not in sys.modules
    job_class = registry.lookup("LateLoadedJob", f"{late_module}:LateJob")
    assert late_module in sys.modules
    assert job_class.__module__ == late_module
    assert job_class.perform_now(1) == 2
    function_job = registry.lookup("late_function", f"{late_module}:late_function")
    assert function_job(2) == 20


def test_lookup_of_an_unknown_job_raises_job_not_found():
    with pytest.raises(JobNotFound, match="NoSuchJob"):
        registry.lookup("NoSuchJob")
    assert issubclass(JobNotFound, flask_solidq.SolidQError)


def test_lookup_with_a_missing_module_raises_job_not_found():
    with pytest.raises(JobNotFound, match="NoSuchJob"):
        registry.lookup("NoSuchJob", f"solidq_missing_module_{uuid.uuid4().hex}:NoSuchJob")


def test_lookup_with_a_path_that_does_not_define_the_job_raises_job_not_found(late_module):
    with pytest.raises(JobNotFound, match="SomeOtherName"):
        registry.lookup("SomeOtherName", f"{late_module}:LateJob")


@pytest.mark.parametrize("path", ["LateJob", "late_function"])
def test_a_job_stored_under_a_name_its_definition_no_longer_has_says_what_to_do(late_module, path):
    """A definition renamed with ``name=`` while jobs wait under the old name (issue 19,
    item 9): the message names the stored job, what its import path defines now, and the
    way out."""
    with pytest.raises(JobNotFound) as raised:
        registry.lookup("OldName", f"{late_module}:{path}")

    message = str(raised.value)
    now = "LateLoadedJob" if path == "LateJob" else "late_function"
    assert message.startswith(
        f"The job 'OldName' isn't defined in this process (its import path"
        f" '{late_module}:{path}' now defines the job '{now}')."
    )
    assert "give the definition its old name back (name=...)" in message
    assert "flask solidq retry --all --job NAME" in message


def test_a_job_whose_module_is_gone_says_what_to_do():
    with pytest.raises(JobNotFound) as raised:
        registry.lookup("Gone", f"solidq_missing_module_{uuid.uuid4().hex}:Gone")

    assert "importing" in str(raised.value)
    assert "if it was removed, define it again or discard its jobs" in str(raised.value)


# -- controls: read-back attributes ----------------------------------------------------------


def account_key(account, *_args, **_kwargs):
    return account


RATE = dict(to=100, per=dt.timedelta(minutes=1), burst=10, key="global", group="Stripe")
CONCURRENCY = dict(to=2, key=account_key, duration=dt.timedelta(minutes=15), group="Accounts")
COALESCE = dict(
    key=account_key,
    on_conflict="collect",
    max_calls=50,
    on_full="dispatch",
    debounce=dt.timedelta(seconds=5),
    max_wait=30,
)


def _three_controls():
    return {
        "rate": limits_rate(**RATE),
        "concurrency": limits_concurrency(**CONCURRENCY),
        "coalesce": coalesce(**COALESCE),
    }


def _build(where, order, name):
    """A job named ``name`` with the three controls in ``order`` (outermost first), placed
    below @solidq.job, above it, split around it, or on a class."""
    decorators = [_three_controls()[kind] for kind in order]

    def sync_account(calls):
        return calls

    if where == "class":

        class Target(solidq.Job, name=name):
            def perform_calls(self, calls):
                return calls

        target = Target
        for decorator in reversed(decorators):
            target = decorator(target)
        return target
    below = {"below": decorators, "above": [], "split": decorators[1:]}[where]
    above = {"below": [], "above": decorators, "split": decorators[:1]}[where]
    function = sync_account
    for decorator in reversed(below):
        function = decorator(function)
    target = solidq.job(name=name)(function)
    for decorator in reversed(above):
        target = decorator(target)
    return target


ORDERS = list(itertools.permutations(["rate", "concurrency", "coalesce"]))


@pytest.mark.parametrize("where", ["below", "above", "split", "class"])
@pytest.mark.parametrize("order", ORDERS, ids=["-".join(order) for order in ORDERS])
def test_controls_in_any_order_expose_the_read_back_attributes(where, order):
    job = _build(where, order, name=f"ReadBack-{where}-{'-'.join(order)}")

    assert job.rate_limit_to == 100
    assert job.rate_limit_per == 60.0
    assert isinstance(job.rate_limit_per, float)
    assert job.rate_limit_burst == 10
    assert job.rate_limit_key == "global"
    assert job.rate_limit_group == "Stripe"
    assert job.rate_limited is True

    assert job.coalesce_key is account_key
    assert job.coalesce_on_conflict == "collect"
    assert job.coalesce_max_calls == 50
    assert job.coalesce_on_full == "dispatch"
    assert job.coalesce_debounce == 5.0
    assert job.coalesce_max_wait == 30.0

    assert job.concurrency_limit == 2
    assert job.concurrency_key is account_key
    assert job.concurrency_duration == 900.0
    assert isinstance(job.concurrency_duration, float)

    assert job.rate_limit_key_for(7) == "Stripe/global"
    assert job.concurrency_key_for(7) == "Accounts/7"
    assert job.coalesce_key_for(7) == f"{job.job_name}/7"


def test_a_job_without_controls_reads_back_nothing():
    @solidq.job
    def plain():
        pass

    for attribute in (
        "rate_limit_to",
        "rate_limit_per",
        "rate_limit_burst",
        "rate_limit_key",
        "rate_limit_group",
        "coalesce_key",
        "coalesce_on_conflict",
        "coalesce_max_calls",
        "coalesce_on_full",
        "coalesce_debounce",
        "coalesce_max_wait",
        "concurrency_limit",
        "concurrency_key",
        "concurrency_duration",
    ):
        assert getattr(plain, attribute) is None, attribute
    assert plain.rate_limited is False
    assert plain.rate_limit_key_for() is None
    assert plain.concurrency_key_for() is None
    assert plain.coalesce_key_for() is None


def test_control_defaults():
    @limits_rate(to=3, per=2, key="global")
    @limits_concurrency(key="k")
    @coalesce(key="k")
    class Defaults(solidq.Job):
        pass

    assert Defaults.rate_limit_burst == 1
    assert Defaults.rate_limit_per == 2.0
    assert Defaults.rate_limit_group is None
    assert Defaults.concurrency_limit == 1
    assert Defaults.concurrency_duration == 180.0
    assert Defaults.concurrency_on_conflict == "block"
    assert Defaults.coalesce_on_conflict == "discard"
    assert Defaults.coalesce_max_calls is None
    assert Defaults.coalesce_on_full is None
    assert Defaults.coalesce_debounce is None
    assert Defaults.coalesce_max_wait is None


def test_coalesce_collect_defaults_to_100_calls_and_waiting_when_full():
    @coalesce(key="k", on_conflict="collect")
    class Collector(solidq.Job):
        pass

    assert Collector.coalesce_max_calls == 100
    assert Collector.coalesce_on_full == "wait"
    assert Collector.is_collecting()


def test_control_decorators_refuse_a_class_that_is_not_a_job():
    class NotAJob:
        pass

    with pytest.raises(TypeError, match="limits_rate"):
        limits_rate(to=1, per=1, key="global")(NotAJob)


# -- controls: inheritance and redeclaring ---------------------------------------------------


def test_subclasses_inherit_controls_with_budgets_of_their_own():
    @limits_rate(to=5, per=1, key="global")
    @limits_concurrency(key=lambda account: account, to=2)
    @coalesce(key=lambda account: account, on_conflict="replace")
    class ApplicationJob(solidq.Job, abstract=True):
        pass

    class Child(ApplicationJob):
        pass

    assert Child.rate_limit_to == 5
    assert Child.rate_limited is True
    assert Child.concurrency_limit == 2
    assert Child.coalesce_on_conflict == "replace"
    assert Child.rate_limit_key_for(1) == f"{Child.job_name}/global"
    assert Child.concurrency_key_for(1) == f"{Child.job_name}/1"
    assert Child.coalesce_key_for(1) == f"{Child.job_name}/1"


def test_a_subclass_redeclaring_limits_rate_keeps_only_its_own_key_and_group():
    @limits_rate(to=5, per=1, key="global", group="Stripe")
    class Parent(solidq.Job, name="RateParent"):
        pass

    @limits_rate(to=2, per=dt.timedelta(seconds=10), key=lambda x: x)
    class Child(Parent, name="RateChild"):
        pass

    assert (Child.rate_limit_to, Child.rate_limit_per, Child.rate_limit_group) == (2, 10.0, None)
    assert Child.rate_limit_key_for(3) == "RateChild/3"
    assert (Parent.rate_limit_to, Parent.rate_limit_per) == (5, 1.0)
    assert Parent.rate_limit_key_for(3) == "Stripe/global"


def test_a_subclass_may_redeclare_coalesce_and_limits_concurrency():
    @limits_concurrency(key="a", to=1)
    @coalesce(key="a")
    class Parent(solidq.Job, name="CoParent"):
        pass

    @limits_concurrency(key="b", to=4)
    @coalesce(key="b", on_conflict="collect", max_calls=3)
    class Child(Parent, name="CoChild"):
        pass

    assert Child.concurrency_limit == 4
    assert Child.concurrency_key_for() == "CoChild/b"
    assert Child.coalesce_on_conflict == "collect"
    assert Child.coalesce_max_calls == 3
    assert Parent.concurrency_limit == 1
    assert Parent.coalesce_on_conflict == "discard"


@pytest.mark.parametrize("disabled", [None, False])
def test_a_subclass_redeclaring_with_key_none_turns_the_limit_off(disabled):
    @limits_rate(to=5, per=1, key="global")
    class Parent(solidq.Job, name="OffParent"):
        pass

    @limits_rate(to=5, per=1, key=disabled)
    class Child(Parent, name="OffChild"):
        pass

    assert Child.rate_limited is False
    assert Child._rate_limit is None
    assert Child.rate_limit_to is None
    assert Child.rate_limit_key_for() is None
    assert Parent.rate_limited is True


def _second_declarations():
    return {
        "limits_rate": (
            limits_rate(to=1, per=1, key="a"),
            limits_rate(to=2, per=1, key="b"),
        ),
        "coalesce": (coalesce(key="a"), coalesce(key="b")),
        "limits_concurrency": (
            limits_concurrency(key="a"),
            limits_concurrency(key="b"),
        ),
    }


KINDS = ["limits_rate", "coalesce", "limits_concurrency"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_second_declaration_in_one_class_raises_value_error(kind):
    first, second = _second_declarations()[kind]

    class Twice(solidq.Job):
        pass

    first(Twice)
    with pytest.raises(ValueError, match=kind):
        second(Twice)


@pytest.mark.parametrize("kind", KINDS)
def test_a_second_declaration_on_one_function_raises_value_error(kind):
    first, second = _second_declarations()[kind]

    def below():
        pass

    with pytest.raises(ValueError, match=kind):
        solidq.job(name=f"twice-below-{kind}")(second(first(below)))

    def split():
        pass

    job = solidq.job(name=f"twice-split-{kind}")(first(split))
    with pytest.raises(ValueError, match=kind):
        second(job)


@pytest.mark.parametrize("kind", KINDS)
def test_a_disabling_declaration_still_counts_as_the_classs_one(kind):
    disabling = {
        "limits_rate": limits_rate(to=1, per=1, key=None),
        "coalesce": coalesce(key=None),
        "limits_concurrency": limits_concurrency(key=None),
    }[kind]
    _, other = _second_declarations()[kind]

    class Off(solidq.Job):
        pass

    disabling(Off)
    with pytest.raises(ValueError, match=kind):
        other(Off)


@pytest.mark.parametrize("disabled", [None, False])
def test_key_none_or_false_disables_every_control(disabled):
    @limits_rate(to=1, per=1, key=disabled)
    @limits_concurrency(key=disabled)
    @coalesce(key=disabled, on_conflict="collect")
    class Disabled(solidq.Job):
        pass

    assert Disabled.rate_limited is False
    assert Disabled._rate_limit is None
    assert Disabled.rate_limit_to is None
    assert Disabled._concurrency_limit is None
    assert Disabled.concurrency_limit is None
    assert Disabled._coalesce is None
    assert Disabled.coalesce_on_conflict is None
    assert not Disabled.is_collecting()
    assert Disabled.rate_limit_key_for(1) is None
    assert Disabled.concurrency_key_for(1) is None
    assert Disabled.coalesce_key_for(1) is None


# -- controls: invalid options ---------------------------------------------------------------


@pytest.mark.parametrize(
    "make, error, option",
    [
        (lambda: limits_rate(to=0, per=1, key="g"), ValueError, "to="),
        (lambda: limits_rate(to=-1, per=1, key="g"), ValueError, "to="),
        (lambda: limits_rate(to="5", per=1, key="g"), TypeError, "to="),
        (lambda: limits_rate(to=1.5, per=1, key="g"), TypeError, "to="),
        (lambda: limits_rate(to=True, per=1, key="g"), TypeError, "to="),
        (lambda: limits_rate(to=5, per=0, key="g"), ValueError, "per="),
        (lambda: limits_rate(to=5, per=-1, key="g"), ValueError, "per="),
        (lambda: limits_rate(to=5, per=dt.timedelta(0), key="g"), ValueError, "per="),
        (lambda: limits_rate(to=5, per="1m", key="g"), TypeError, "per="),
        (lambda: limits_rate(to=5, per=float("inf"), key="g"), ValueError, "per="),
        (lambda: limits_rate(to=5, per=1, burst=0, key="g"), ValueError, "burst="),
        (lambda: limits_rate(to=5, per=1, burst="2", key="g"), TypeError, "burst="),
        (lambda: limits_rate(to=5, per=1, burst=6, key="g"), ValueError, "burst="),
        (lambda: limits_rate(to=10_000, per=1, key="g"), ValueError, "per"),
        (lambda: limits_rate(to=20, per=0.01, burst=5, key="g"), ValueError, "per"),
        (lambda: coalesce(key="k", on_conflict="merge"), ValueError, "on_conflict="),
        (lambda: coalesce(key="k", on_conflict=None), ValueError, "on_conflict="),
        (lambda: coalesce(key="k", max_calls=5), ValueError, "max_calls="),
        (lambda: coalesce(key="k", on_conflict="replace", max_calls=5), ValueError, "max_calls="),
        (lambda: coalesce(key="k", on_full="wait"), ValueError, "on_full="),
        (lambda: coalesce(key="k", on_conflict="collect", on_full="drop"), ValueError, "on_full="),
        # Only None means "wait": a value that is merely falsy is refused, not taken for it.
        (lambda: coalesce(key="k", on_conflict="collect", on_full=""), ValueError, "on_full="),
        (lambda: coalesce(key="k", on_conflict="collect", on_full=False), ValueError, "on_full="),
        (lambda: coalesce(key="k", on_conflict="collect", on_full=0), ValueError, "on_full="),
        (lambda: coalesce(key="k", on_conflict="collect", max_calls=0), ValueError, "max_calls="),
        (lambda: coalesce(key="k", on_conflict="collect", max_calls="9"), TypeError, "max_calls="),
        (lambda: coalesce(key="k", max_wait=10), ValueError, "max_wait="),
        (lambda: coalesce(key="k", debounce=5, max_wait=5), ValueError, "max_wait="),
        (lambda: coalesce(key="k", debounce=5, max_wait=2), ValueError, "max_wait="),
        (lambda: coalesce(key="k", debounce=0), ValueError, "debounce="),
        (lambda: coalesce(key="k", debounce=-1), ValueError, "debounce="),
        (lambda: coalesce(key="k", debounce="5s"), TypeError, "debounce="),
        (lambda: limits_concurrency(key="k", to=0), ValueError, "to="),
        (lambda: limits_concurrency(key="k", to="1"), TypeError, "to="),
        (lambda: limits_concurrency(key="k", duration=0), ValueError, "duration="),
        (lambda: limits_concurrency(key="k", duration="3m"), TypeError, "duration="),
        (lambda: limits_concurrency(key="k", on_conflict="wait"), ValueError, "on_conflict="),
    ],
)
def test_invalid_options_raise_at_decoration_time_naming_the_option(make, error, option):
    with pytest.raises(error) as info:
        make()
    assert option in str(info.value)


def test_the_shortest_allowed_interval_is_one_millisecond():
    limits_rate(to=1000, per=1, key="g")
    limits_rate(to=10, per=0.01, burst=1, key="g")


def test_burst_equal_to_to_is_allowed():
    @limits_rate(to=5, per=1, burst=5, key="g")
    class FullBurst(solidq.Job):
        pass

    assert FullBurst.rate_limit_burst == 5


# -- controls: forbidden combinations --------------------------------------------------------


def _discard_concurrency():
    return limits_concurrency(key="k", on_conflict="discard")


@pytest.mark.parametrize("rate_first", [True, False])
def test_concurrency_discard_with_limits_rate_raises_in_either_order(rate_first):
    rate = limits_rate(to=1, per=1, key="g")

    class Combined(solidq.Job):
        pass

    first, second = (rate, _discard_concurrency()) if rate_first else (_discard_concurrency(), rate)
    first(Combined)
    with pytest.raises(ValueError, match="discard"):
        second(Combined)


@pytest.mark.parametrize("rate_below", [True, False])
def test_concurrency_discard_with_limits_rate_raises_on_functions(rate_below):
    def combined():
        pass

    if rate_below:
        with pytest.raises(ValueError, match="limits_rate"):
            solidq.job(_discard_concurrency()(limits_rate(to=1, per=1, key="g")(combined)))
    else:
        job = solidq.job(_discard_concurrency()(combined))
        with pytest.raises(ValueError, match="limits_rate"):
            limits_rate(to=1, per=1, key="g")(job)


def test_concurrency_discard_with_an_inherited_rate_limit_raises():
    @limits_rate(to=1, per=1, key="g")
    class RateParent(solidq.Job, abstract=True):
        pass

    with pytest.raises(ValueError, match="limits_rate"):

        @_discard_concurrency()
        class Child(RateParent):
            pass


def test_a_rate_limit_on_a_class_inheriting_concurrency_discard_raises():
    @_discard_concurrency()
    class DiscardParent(solidq.Job, abstract=True):
        pass

    with pytest.raises(ValueError, match="limits_rate"):

        @limits_rate(to=1, per=1, key="g")
        class Child(DiscardParent):
            pass


@pytest.mark.parametrize("mode", ["replace", "collect"])
@pytest.mark.parametrize("coalesce_first", [True, False])
def test_concurrency_discard_with_coalesce_replace_or_collect_raises(mode, coalesce_first):
    merge = coalesce(key="k", on_conflict=mode)

    class Combined(solidq.Job):
        pass

    first, second = (
        (merge, _discard_concurrency())
        if coalesce_first
        else (
            _discard_concurrency(),
            merge,
        )
    )
    first(Combined)
    with pytest.raises(ValueError, match=mode):
        second(Combined)


@pytest.mark.parametrize("mode", ["replace", "collect"])
def test_concurrency_discard_with_inherited_coalesce_replace_or_collect_raises(mode):
    @coalesce(key="k", on_conflict=mode)
    class Parent(solidq.Job, abstract=True):
        pass

    with pytest.raises(ValueError, match=mode):

        @_discard_concurrency()
        class Child(Parent):
            pass


def test_allowed_combinations_do_not_raise():
    @limits_rate(to=1, per=1, key="g")
    @limits_concurrency(key="k", on_conflict="block")
    @coalesce(key="k", on_conflict="collect")
    class Block(solidq.Job):
        pass

    @_discard_concurrency()
    @coalesce(key="k", on_conflict="discard")
    class DiscardBoth(solidq.Job):
        pass

    @limits_rate(to=1, per=1, key=None)
    @_discard_concurrency()
    class RateOff(solidq.Job):
        pass

    assert Block.rate_limited and DiscardBoth.concurrency_on_conflict == "discard"
    assert not RateOff.rate_limited


# -- keys ------------------------------------------------------------------------------------


def _rate(key, group=None):
    return limits_rate(to=1, per=1, key=key, group=group)


def _concurrency(key, group=None):
    return limits_concurrency(key=key, group=group)


def _coalesce(key, group=None):
    assert group is None
    return coalesce(key=key)


KEY_KINDS = {
    "rate": (_rate, "rate_limit_key_for"),
    "concurrency": (_concurrency, "concurrency_key_for"),
    "coalesce": (_coalesce, "coalesce_key_for"),
}


def _key_for(kind, key, /, *args, group=None, name="KeyJob", **kwargs):
    decorator, method = KEY_KINDS[kind]
    job_class = type(name, (solidq.Job,), {}, name=name)
    decorator(key, group)(job_class)
    return getattr(job_class, method)(*args, **kwargs)


@pytest.mark.parametrize("kind", KEY_KINDS)
@pytest.mark.parametrize(
    "key, args, kwargs, expected",
    [
        ("global", (1,), {}, "KeyJob/global"),
        (lambda account_id: account_id, (42,), {}, "KeyJob/42"),
        (lambda account_id: str(account_id), (42,), {}, "KeyJob/42"),
        (lambda a, kind=None: [a, kind], (7,), {"kind": "full"}, "KeyJob/7/full"),
        (lambda a, **kw: kw["label"], (7,), {"label": "n"}, "KeyJob/n"),
        (lambda a, b: (a, b), (7, "x"), {}, "KeyJob/7/x"),
        (lambda *_: ["a/b"], (), {}, "KeyJob/a/b"),
        (lambda *_: ["a", "b"], (), {}, "KeyJob/a/b"),
        (lambda *_: [1, None, 2], (), {}, "KeyJob/1/2"),
        (lambda *_: None, (1,), {}, "KeyJob"),
        (lambda *_: [], (1,), {}, "KeyJob"),
        (lambda account: account, (Account(id=42),), {}, "KeyJob/Account/42"),
        (lambda shop, sku: [shop, sku], (Shop(id=3), "sku-1"), {}, "KeyJob/Shop/3/sku-1"),
        (123, (1,), {}, "KeyJob"),
        ([], (1,), {}, "KeyJob"),
        ({}, (1,), {}, "KeyJob"),
        ("", (1,), {}, "KeyJob/"),
    ],
)
def test_keys_are_built_as_the_seeds_describe(kind, key, args, kwargs, expected):
    assert _key_for(kind, key, *args, **kwargs) == expected


@pytest.mark.parametrize("kind", ["rate", "concurrency"])
def test_group_replaces_the_job_name_in_the_key(kind):
    assert _key_for(kind, "global", group="Stripe") == "Stripe/global"
    assert (
        _key_for(kind, lambda account: account, Account(id=7), group="StripeConnect")
        == "StripeConnect/Account/7"
    )
    assert _key_for(kind, lambda *_: None, 1, group="Stripe") == "Stripe"
    assert _key_for(kind, "global", "t1", group=lambda tenant: tenant) == "t1/global"


def test_coalesce_has_no_group_option():
    with pytest.raises(TypeError):
        coalesce(key="k", group="Shared")


@pytest.mark.parametrize("kind", KEY_KINDS)
def test_a_key_callable_that_raises_propagates(kind):
    def broken(*_args):
        raise LookupError("no such account")

    with pytest.raises(LookupError, match="no such account"):
        _key_for(kind, broken, 1)


@pytest.mark.parametrize("kind", KEY_KINDS)
def test_one_and_the_string_one_give_the_same_key(kind):
    assert _key_for(kind, lambda x: x, 1) == _key_for(kind, lambda x: x, "1") == "KeyJob/1"


def test_a_function_job_key_starts_with_its_name():
    @solidq.job(name="SyncShopOrders")
    @limits_rate(to=2, per=1, burst=2, key=lambda shop: shop)
    def sync_shop_orders(shop):
        pass

    assert sync_shop_orders.rate_limit_key_for(Shop(id=42)) == "SyncShopOrders/Shop/42"


# -- retry_on / discard_on -------------------------------------------------------------------


def _rules(job_class):
    return job_class._failure_rules


def test_retry_on_needs_at_least_one_exception_class():
    with pytest.raises(TypeError, match="exception"):
        retry_on()
    with pytest.raises(TypeError, match="exception"):
        discard_on()


@pytest.mark.parametrize("bad", [TimeoutError(), "TimeoutError", int, None])
def test_retry_on_and_discard_on_take_only_exception_classes(bad):
    with pytest.raises(TypeError):
        retry_on(TimeoutError, bad)
    with pytest.raises(TypeError):
        discard_on(bad)


def _retry_rule(**options):
    options.setdefault("jitter", 0)

    @retry_on(TimeoutError, **options)
    class Retrying(solidq.Job):
        pass

    (rule,) = _rules(Retrying)
    assert isinstance(rule, RetryRule)
    return rule


def test_retry_on_defaults():
    rule = _retry_rule(jitter=0.15)
    assert rule.exceptions == (TimeoutError,)
    assert rule.wait == 3
    assert rule.attempts == 5
    assert rule.jitter == 0.15


@pytest.mark.parametrize(
    "wait, executions, expected",
    [
        (5, 1, 5.0),
        (0, 3, 0.0),
        (2.5, 1, 2.5),
        (dt.timedelta(minutes=1), 2, 60.0),
        ("polynomially_longer", 1, 3.0),
        ("polynomially_longer", 2, 18.0),
        ("polynomially_longer", 3, 83.0),
        (lambda executions: executions * 10, 3, 30.0),
        (lambda executions: dt.timedelta(seconds=executions), 4, 4.0),
    ],
)
def test_retry_wait_seconds_for_each_kind_of_wait(wait, executions, expected):
    assert _retry_rule(wait=wait).wait_seconds(executions) == expected


def test_retry_jitter_adds_up_to_that_fraction_of_the_wait(monkeypatch):
    rule = _retry_rule(wait=10, jitter=0.5)
    monkeypatch.setattr(failure_rules.random, "random", lambda: 1.0)
    assert rule.wait_seconds(1) == 15.0
    monkeypatch.setattr(failure_rules.random, "random", lambda: 0.0)
    assert rule.wait_seconds(1) == 10.0


def test_a_wait_callable_returning_a_negative_duration_raises():
    rule = _retry_rule(wait=lambda executions: -1)
    with pytest.raises(ValueError):
        rule.wait_seconds(1)


@pytest.mark.parametrize(
    "options, error",
    [
        ({"wait": "soon"}, ValueError),
        ({"wait": "polynomially"}, ValueError),
        ({"wait": -1}, ValueError),
        ({"wait": None}, TypeError),
        ({"attempts": 0}, ValueError),
        ({"attempts": -2}, ValueError),
        ({"attempts": "forever"}, TypeError),
        ({"attempts": 2.5}, TypeError),
        ({"jitter": -0.1}, ValueError),
        ({"jitter": 1.5}, ValueError),
        ({"jitter": "x"}, ValueError),
        ({"queue": 5}, TypeError),
        ({"priority": "high"}, TypeError),
        ({"fallback": "not callable"}, TypeError),
    ],
)
def test_retry_on_refuses_invalid_options(options, error):
    with pytest.raises(error) as info:
        retry_on(TimeoutError, **options)
    assert next(iter(options)) in str(info.value)


def test_discard_on_refuses_a_callback_that_is_not_callable():
    with pytest.raises(TypeError, match="callback"):
        discard_on(LookupError, callback="nope")


def test_retry_attempts_unlimited_is_never_exhausted():
    rule = _retry_rule(attempts="unlimited")
    assert rule.attempts is None
    assert not rule.is_exhausted(1)
    assert not rule.is_exhausted(10_000)


def test_retry_is_exhausted_after_attempts_runs():
    rule = _retry_rule(attempts=3)
    assert not rule.is_exhausted(1)
    assert not rule.is_exhausted(2)
    assert rule.is_exhausted(3)
    assert rule.is_exhausted(4)


def test_find_rule_picks_the_most_recently_applied_matching_rule():
    @retry_on(TimeoutError, attempts=2)
    @discard_on(Exception)
    @retry_on(TimeoutError, attempts=9)
    class Handled(solidq.Job):
        pass

    timeout_rule = failures.find_rule(Handled, TimeoutError())
    assert isinstance(timeout_rule, RetryRule)
    assert timeout_rule.attempts == 2
    assert isinstance(failures.find_rule(Handled, KeyError("x")), DiscardRule)
    assert failures.find_rule(Handled, KeyboardInterrupt()) is None


def test_find_rule_on_a_function_job_prefers_the_decorators_above_it():
    @discard_on(ValueError)
    @solidq.job
    @retry_on(ValueError)
    def function_job():
        pass

    assert isinstance(failures.find_rule(function_job, ValueError()), DiscardRule)


def test_find_rule_prefers_a_subclasss_rules_over_its_parents():
    @retry_on(LookupError)
    class Parent(solidq.Job, name="RulesParent"):
        pass

    @discard_on(KeyError)
    class Child(Parent, name="RulesChild"):
        pass

    assert isinstance(failures.find_rule(Child, KeyError("k")), DiscardRule)
    assert isinstance(failures.find_rule(Child, IndexError()), RetryRule)
    assert isinstance(failures.find_rule(Parent, KeyError("k")), RetryRule)
    assert failures.find_rule(Child, ValueError()) is None


def test_a_job_without_rules_finds_none():
    class Ruleless(solidq.Job):
        pass

    assert failures.find_rule(Ruleless, Exception()) is None


# -- job instances ---------------------------------------------------------------------------


@pytest.fixture
def echo_job():
    class Echo(solidq.Job, name="Echo"):
        queue_name = "echoes"
        priority = 2

        def perform(self, *args, **kwargs):
            return args, kwargs

    return Echo


@pytest.fixture
def echo_function():
    @solidq.job(name="echo_function")
    def echo(*args, **kwargs):
        return args, kwargs

    return echo


def test_new_holds_the_arguments_and_a_fresh_job_id(echo_job):
    job = echo_job.new(1, a=2)
    assert isinstance(job, echo_job)
    assert job.arguments == (1,)
    assert job.args == (1,)
    assert job.kwargs == {"a": 2}
    assert str(uuid.UUID(job.job_id)) == job.job_id
    assert job.provider_job_id is None
    assert job.successfully_enqueued is None
    assert job.coalesce_status is None
    assert job.executions == 0
    assert job.queue_name == "echoes"
    assert job.priority == 2
    assert echo_job.new().job_id != job.job_id


def test_job_ids_are_random_uuids_of_version_4_in_canonical_text():
    ids = [job_ids.new() for _ in range(2000)]
    parsed = [uuid.UUID(job_id) for job_id in ids]
    assert [str(value) for value in parsed] == ids
    assert {value.version for value in parsed} == {4}
    assert {value.variant for value in parsed} == {uuid.RFC_4122}
    # The variant's digit keeps its two random bits, as uuid.uuid4()'s does.
    assert {job_id[19] for job_id in ids} == set("89ab")
    assert len(set(ids)) == len(ids)


def test_new_on_a_function_job_builds_a_job_without_calling_the_function():
    calls = []

    @solidq.job
    def record(x):
        calls.append(x)

    job = record.new(5, flag=True)
    assert isinstance(job, record)
    assert (job.arguments, job.kwargs) == ((5,), {"flag": True})
    assert calls == []


def test_set_on_the_class_returns_a_configured_definition(echo_job):
    configured = echo_job.set(queue="low", priority=5, wait=30)
    for method in ("perform_later", "perform_now", "new"):
        assert callable(getattr(configured, method))
    job = configured.new(1, a=2)
    assert isinstance(job, echo_job)
    assert (job.queue_name, job.priority) == ("low", 5)
    assert (job.arguments, job.kwargs) == ((1,), {"a": 2})
    now = dt.datetime(2026, 1, 1, tzinfo=UTC)
    assert job.resolve_scheduled_at(now) == now + dt.timedelta(seconds=30)
    assert echo_job.queue_name == "echoes"
    assert echo_job.priority == 2
    assert configured.perform_now(3, b=4) == ((3,), {"b": 4})


def test_set_on_an_instance_returns_the_job(echo_job):
    job = echo_job.new(1)
    assert job.set(queue="low", priority=-3) is job
    assert (job.queue_name, job.priority) == ("low", -3)
    assert echo_job.queue_name == "echoes"


def test_set_on_a_function_job_class_and_instance(echo_function):
    job = echo_function.set(queue="fn", priority=1).new(9)
    assert (job.queue_name, job.priority, job.arguments) == ("fn", 1, (9,))
    other = echo_function.new(8)
    assert other.set(priority=4) is other
    assert echo_function.priority == 0


def test_set_wait_accepts_seconds_and_timedelta(echo_job):
    now = dt.datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert echo_job.new().set(wait=1.5).resolve_scheduled_at(now) == now + dt.timedelta(seconds=1.5)
    minute = echo_job.new().set(wait=dt.timedelta(minutes=1))
    assert minute.resolve_scheduled_at(now) == now + dt.timedelta(minutes=1)
    assert echo_job.new().set(wait=0).resolve_scheduled_at(now) in (None, now)
    assert echo_job.new().resolve_scheduled_at(now) is None


def test_set_wait_until_keeps_an_aware_time_in_utc(echo_job):
    paris_noon = dt.datetime(2026, 12, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    job = echo_job.new().set(wait_until=paris_noon)
    assert job.scheduled_at == paris_noon
    assert job.scheduled_at.utcoffset() == dt.timedelta(0)
    assert job.scheduled_at.hour == 11
    assert job.resolve_scheduled_at(dt.datetime(2026, 1, 1, tzinfo=UTC)) == paris_noon


def test_set_wait_until_takes_a_naive_time_as_utc(echo_job):
    job = echo_job.new().set(wait_until=dt.datetime(2026, 12, 1, 9, 30))
    assert job.scheduled_at == dt.datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    assert job.scheduled_at.utcoffset() == dt.timedelta(0)


def test_a_later_wait_replaces_an_earlier_wait_until(echo_job):
    now = dt.datetime(2026, 1, 1, tzinfo=UTC)
    job = echo_job.new().set(wait_until=dt.datetime(2030, 1, 1, tzinfo=UTC)).set(wait=10)
    assert job.resolve_scheduled_at(now) == now + dt.timedelta(seconds=10)
    job.set(wait_until=dt.datetime(2030, 1, 1, tzinfo=UTC))
    assert job.resolve_scheduled_at(now) == dt.datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "options, error",
    [
        ({"wait": 5, "wait_until": dt.datetime(2030, 1, 1, tzinfo=UTC)}, ValueError),
        ({"wait": -1}, ValueError),
        ({"wait": dt.timedelta(seconds=-1)}, ValueError),
        ({"wait": "30"}, TypeError),
        ({"wait_until": "2030-01-01"}, TypeError),
        ({"wait_until": dt.date(2030, 1, 1)}, TypeError),
        ({"wait_until": 1_900_000_000}, TypeError),
        ({"queue": 5}, TypeError),
        ({"queue": ["low"]}, TypeError),
        ({"queue": ""}, TypeError),
        ({"priority": "5"}, TypeError),
        ({"priority": 1.0}, TypeError),
        ({"priority": True}, TypeError),
        ({"retries": 3}, TypeError),
    ],
)
def test_set_refuses_invalid_options_on_class_and_instance(echo_job, options, error):
    with pytest.raises(error):
        echo_job.set(**options)
    with pytest.raises(error):
        echo_job.new(1).set(**options)


def test_perform_now_on_the_class_runs_perform_and_returns_its_value(echo_job):
    assert echo_job.perform_now(1, a=2) == ((1,), {"a": 2})


def test_perform_now_on_an_instance_runs_it_and_counts_executions(echo_job):
    job = echo_job.new(3)
    assert job.perform_now() == ((3,), {})
    assert job.executions == 1
    job.perform_now()
    assert job.executions == 2


def test_perform_now_on_a_function_job_calls_the_function(echo_function):
    assert echo_function.perform_now(1, k="v") == ((1,), {"k": "v"})
    assert echo_function.new(2).perform_now() == ((2,), {})


def test_current_job_is_the_running_job_during_perform_now():
    seen = []

    @solidq.job(name="current_function")
    def inspect_current(x):
        seen.append((current_job.job_id, current_job.arguments, current_job.executions))
        return current_job._get_current_object()

    job = inspect_current.new(7)
    assert job.perform_now() is job
    assert seen == [(job.job_id, (7,), 1)]

    class Inspecting(solidq.Job):
        def perform(self):
            return current_job._get_current_object() is self

    assert Inspecting.perform_now() is True


def test_current_job_outside_a_job_raises_runtime_error(echo_job):
    with pytest.raises(RuntimeError):
        _ = current_job.job_id
    echo_job.perform_now()
    with pytest.raises(RuntimeError):
        _ = current_job.job_id


def test_current_job_is_reset_when_perform_raises():
    class Failing(solidq.Job):
        def perform(self):
            raise LookupError("boom")

    with pytest.raises(LookupError, match="boom"):
        Failing.perform_now()
    with pytest.raises(RuntimeError):
        _ = current_job.job_id


def test_nested_perform_now_restores_the_outer_current_job(echo_job):
    class Outer(solidq.Job):
        def perform(self):
            inner = echo_job.new()
            inner.perform_now()
            return current_job._get_current_object() is self

    assert Outer.perform_now() is True


def test_perform_now_applies_no_control():
    def refuse(*_args):
        raise AssertionError("perform_now must not compute keys")

    @solidq.job
    @limits_rate(to=1, per=1, key=refuse)
    @limits_concurrency(key=refuse)
    @coalesce(key=refuse)
    def controlled(x):
        return x + 1

    assert controlled.perform_now(1) == 2
    assert controlled.perform_now(2) == 3


def test_a_class_without_perform_raises_not_implemented_error():
    class Empty(solidq.Job):
        pass

    with pytest.raises(NotImplementedError, match="perform"):
        Empty.perform_now()


def test_perform_now_of_a_collecting_class_passes_one_call():
    @coalesce(key=lambda shop, sku=None: shop, on_conflict="collect")
    class Collecting(solidq.Job):
        def perform(self, *args, **kwargs):
            raise AssertionError("a collecting job runs perform_calls")

        def perform_calls(self, calls):
            return calls

    job = Collecting.new(3, sku="A-1")
    calls = job.perform_now()
    assert len(calls) == 1
    (call,) = calls
    assert isinstance(call, Call)
    assert call.id is None
    assert call.args == (3,)
    assert call.arguments == (3,)
    assert call.kwargs == {"sku": "A-1"}
    assert isinstance(call.job_data, types.MappingProxyType)
    with pytest.raises(TypeError):
        call.job_data["args"] = []
    assert job.coalesced_calls == calls
    assert Collecting.perform_now(4)[0].args == (4,)


def test_perform_now_of_a_collecting_function_passes_a_list_of_one_call():
    @solidq.job
    @coalesce(key="all", on_conflict="collect", max_calls=10)
    def push_inventory(calls):
        return [(call.id, call.args, call.kwargs) for call in calls]

    assert push_inventory.perform_now("shop", "sku") == [(None, ("shop", "sku"), {})]
    assert push_inventory.perform_now(1, n=2) == [(None, (1,), {"n": 2})]


def test_a_collecting_class_without_perform_calls_raises_not_implemented_error():
    @coalesce(key="k", on_conflict="collect")
    class NoPerformCalls(solidq.Job):
        def perform(self):
            pass

    with pytest.raises(NotImplementedError, match="perform_calls"):
        NoPerformCalls.perform_now()


def test_payload_round_trips_through_json(echo_job):
    when = dt.datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)
    job = echo_job.new(1, (2, 3), {"k": [4]}, when, a=2, b={"nested": (5,)})
    text = json.dumps(job.payload())
    data = json.loads(text)
    assert data["job"] == f"{echo_job.__module__}:{echo_job.__qualname__}"

    loaded = echo_job.new()
    loaded.load_payload(data)
    assert loaded.arguments == (1, (2, 3), {"k": [4]}, when)
    assert isinstance(loaded.arguments[1], tuple)
    assert loaded.kwargs == {"a": 2, "b": {"nested": (5,)}}
    assert isinstance(loaded.kwargs["b"]["nested"], tuple)
    assert loaded.perform_now() == job.perform_now()


def test_payload_keeps_the_execution_counters(echo_job):
    job = echo_job.new("x")
    job.perform_now()
    job.exception_executions["[TimeoutError]"] = 1
    loaded = echo_job.new()
    loaded.load_payload(json.loads(json.dumps(job.payload())))
    assert loaded.executions == 1
    assert loaded.exception_executions == {"[TimeoutError]": 1}
    assert loaded.arguments == ("x",)
    assert loaded.kwargs == {}


def test_a_function_jobs_payload_names_its_import_path(echo_function):
    data = json.loads(json.dumps(echo_function.new(1, x=2).payload()))
    assert data["job"] == f"{__name__}:{echo_function.__qualname__}"
    loaded = echo_function.new()
    loaded.load_payload(data)
    assert (loaded.arguments, loaded.kwargs) == ((1,), {"x": 2})
