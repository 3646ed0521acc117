"""An ``async def`` job is refused where it is defined, in both forms, until the workers run
coroutines: accepted, it would be stored, claimed and marked finished without running."""

from __future__ import annotations

import asyncio

import pytest

import flask_solidq
from flask_solidq.definitions import registry

solidq = flask_solidq.SolidQ()


def test_an_async_function_job_is_refused_with_what_to_do_instead():
    with pytest.raises(TypeError, match=r"async_sync_crm is an async def.*asyncio\.run"):

        @solidq.job(name="async_refused.function")
        async def async_sync_crm(account_id: int) -> None: ...


def test_an_async_perform_is_refused_and_the_job_is_not_registered():
    with pytest.raises(TypeError, match="AsyncPerform is an async def"):

        class AsyncPerform(flask_solidq.Job, name="async_refused.class"):
            async def perform(self) -> None: ...

    assert not registry.is_registered("async_refused.class")


def test_a_sync_job_that_runs_a_coroutine_inside_is_defined_and_runs_it():
    async def fetch(account_id: int) -> int:
        return account_id * 2

    @solidq.job(name="async_refused.sync")
    def sync_crm(account_id: int) -> int:
        return asyncio.run(fetch(account_id))

    assert sync_crm(7) == 14
