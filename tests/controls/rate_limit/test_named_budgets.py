"""Declaring named budgets and the limits that charge them, without a database:
``rate_limiter.register`` (checked as ``limits_rate`` is), ``limits_rate(budget=)`` and
``limits_rate`` without ``key=`` (the job's bare budget, as seed 000's key that returns None)."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest

from flask_solidq import SolidQ
from flask_solidq import keys
from flask_solidq import limits_rate
from flask_solidq.controls import rate_limit
from flask_solidq.controls.rate_limit import named_budgets
from flask_solidq.definitions import registry

limiter = SolidQ().rate_limiter


@pytest.fixture(autouse=True)
def _forget_what_the_test_defined() -> t.Iterator[None]:
    """Job and budget names are global to the process: forget whatever a test added."""
    jobs, budgets = set(registry.names()), set(named_budgets.names())
    yield
    for name in set(registry.names()) - jobs:
        registry.unregister(registry.lookup(name))
    for name in set(named_budgets.names()) - budgets:
        named_budgets.unregister(name)


# -- register ---------------------------------------------------------------------------------


def test_register_declares_a_budget_that_limits_rate_budget_charges_by_its_name():
    assert limiter.register("unit_nb.stripe", to=100, per=60, burst=10) == "unit_nb.stripe"

    @SolidQ().job(name="unit_nb.sync")
    @limits_rate(budget="unit_nb.stripe")
    def sync(account_id: int) -> None: ...

    (limit,) = sync.rate_limits
    assert (limit.to, limit.per, limit.burst, limit.budget) == (100, 60.0, 10, "unit_nb.stripe")
    assert (sync.rate_limit_to, sync.rate_limit_per, sync.rate_limit_burst) == (100, 60.0, 10)
    assert sync.rate_limit_key_for(42) == "unit_nb.stripe"
    assert rate_limit.declaration_for("unit_nb.stripe") == named_budgets.find("unit_nb.stripe")


def test_registering_again_with_the_same_figures_is_fine_with_others_raises():
    limiter.register("unit_nb.again", to=5, per=dt.timedelta(seconds=2), burst=2)
    limiter.register("unit_nb.again", to=5, per=2, burst=2)

    with pytest.raises(ValueError, match="registered already with to=5, per=2, burst=2"):
        limiter.register("unit_nb.again", to=6, per=2, burst=2)
    assert named_budgets.find("unit_nb.again").to == 5


@pytest.mark.parametrize(
    ("name", "figures", "error", "match"),
    [
        ("unit_nb.bad", {"to": 0, "per": 1}, ValueError, r"register\(to=\) must be a positive"),
        ("unit_nb.bad", {"to": 1, "per": -1}, ValueError, r"register\(per=\)"),
        ("unit_nb.bad", {"to": 2, "per": 1, "burst": 3}, ValueError, "at most to=2"),
        ("unit_nb.bad", {"to": 1, "per": 1, "burst": 1.5}, TypeError, "positive int"),
        ("unit_nb.bad", {"to": 10_000, "per": 1}, ValueError, "at least 0.001s"),
        ("a/b", {"to": 1, "per": 1}, ValueError, "without '/'"),
        ("", {"to": 1, "per": 1}, ValueError, "non-empty"),
        (42, {"to": 1, "per": 1}, ValueError, "str"),
        ("x" * 256, {"to": 1, "per": 1}, ValueError, "at most 255 characters"),
    ],
)
def test_register_refuses_what_limits_rate_refuses_and_a_name_that_is_no_key(
    name: t.Any, figures: dict[str, t.Any], error: type[Exception], match: str
):
    with pytest.raises(error, match=match):
        limiter.register(name, **figures)
    assert named_budgets.find(str(name)) is None


@pytest.mark.parametrize(
    "given",
    [
        {"to": 1},
        {"per": 60},
        {"key": "global"},
        {"key": None},
        {"burst": 1},
        {"group": "Stripe"},
        {"cost": 2},
    ],
)
def test_limits_rate_refuses_budget_with_an_option_the_registration_gives(given):
    limiter.register("unit_nb.exclusive", to=10, per=1)

    with pytest.raises(TypeError, match=f"drop {next(iter(given))}="):
        limits_rate(budget="unit_nb.exclusive", **given)


def test_a_job_naming_an_unregistered_budget_raises_when_declared_saying_how_to_register():
    with pytest.raises(ValueError, match="no budget named 'unit_nb.nowhere' is registered") as e:
        limits_rate(budget="unit_nb.nowhere")
    assert "solidq.rate_limiter.register('unit_nb.nowhere', to=..., per=...)" in str(e.value)


def test_two_budgets_stack_on_a_job_with_distinct_names():
    limiter.register("unit_nb.calls", to=10, per=1)
    limiter.register("unit_nb.daily", to=1000, per=dt.timedelta(days=1))

    @SolidQ().job(name="unit_nb.stacked")
    @limits_rate(budget="unit_nb.calls")
    @limits_rate(budget="unit_nb.daily", name="daily")
    def stacked() -> None: ...

    assert [(limit.budget, limit.name) for limit in stacked.rate_limits] == [
        ("unit_nb.calls", None),
        ("unit_nb.daily", "daily"),
    ]
    with pytest.raises(ValueError, match="distinct name="):

        @SolidQ().job(name="unit_nb.twice")
        @limits_rate(budget="unit_nb.calls")
        @limits_rate(budget="unit_nb.daily")
        def twice() -> None: ...


def test_a_budget_is_found_by_its_exact_name_before_any_job_of_that_name():
    limiter.register("unit_nb.owner", to=3, per=1)

    @SolidQ().job(name="unit_nb.owner")
    @limits_rate(to=1, per=60)
    def owner() -> None: ...

    assert rate_limit.declaration_for("unit_nb.owner") is named_budgets.find("unit_nb.owner")


# -- limits_rate without key= ------------------------------------------------------------------


def test_limits_rate_without_key_charges_the_jobs_bare_budget_or_its_groups():
    @SolidQ().job(name="unit_nb.bare")
    @limits_rate(to=1, per=60)
    def bare(account_id: int) -> None: ...

    @SolidQ().job(name="unit_nb.grouped")
    @limits_rate(to=1, per=60, group="unit_nb.Group")
    def grouped(account_id: int) -> None: ...

    @SolidQ().job(name="unit_nb.blank")
    @limits_rate(to=1, per=60, group=lambda account_id: None)
    def blank(account_id: int) -> None: ...

    assert bare.rate_limit_key_for(1) == bare.rate_limit_key_for(2) == "unit_nb.bare"
    assert grouped.rate_limit_key_for(1) == "unit_nb.Group"
    # A key that comes out blank leaves the job unlimited (the seed's group: nil case).
    assert blank.rate_limit_key_for(1) is None
    assert bare.rate_limit_key is keys.BARE
    assert bare.rate_limited is True


def test_limits_rate_without_to_or_per_raises_type_error_naming_budget():
    with pytest.raises(TypeError, match="needs to= and per=.*or budget="):
        limits_rate(to=1)
    with pytest.raises(TypeError, match="needs to= and per="):
        limits_rate(per=1, key="global")
