"""A ready wake-up names the queues its jobs are on, and a worker that claims from none of them
sleeps on instead of running a claim that finds nothing (an enqueue woke every idle worker of
the machine: 12 idle workers of another queue halved a PostgreSQL enqueue rate)."""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

from flask_solidq.operations.queue_selector import QueueSelector
from flask_solidq.processes import job_notices
from flask_solidq.processes.host_bell import WORKER
from flask_solidq.processes.host_bell import HostBell
from tests.jobs import basic as jobs
from tests.support import solidq


@pytest.mark.parametrize(
    ("queues", "name", "claims"),
    [
        (("*",), "mail", True),
        (("mail",), "mail", True),
        (("mail",), "mailer", False),
        (("mail*",), "mailer", True),
        (("urgent", "mail*"), "mail", True),
        (("urgent", "mail*"), "default", False),
    ],
)
def test_a_selector_says_which_queues_it_claims_from(queues, name, claims):
    assert QueueSelector(queues).matches(name) is claims


def test_a_wake_up_naming_queues_concerns_only_the_workers_of_one_of_them():
    payload = job_notices.encode_queues(["mail", "default", "mail"])
    assert job_notices.decode_queues(payload) == ["default", "mail"]
    assert job_notices.concerns(payload, QueueSelector(("mail*",)).matches)
    assert not job_notices.concerns(payload, QueueSelector(("urgent",)).matches)


def test_a_wake_up_naming_no_queue_or_too_many_concerns_every_worker():
    many = [f"queue-{index:04d}" for index in range(40)]
    assert job_notices.encode_queues(many) == b""
    for payload in (b"", "", job_notices.encode_queues(many), b"not json", b'{"a": 1}'):
        assert job_notices.concerns(payload, QueueSelector(("urgent",)).matches)


def test_an_enqueue_rings_the_machines_workers_with_its_queues(app, engine):
    listener = HostBell(engine.url).listen(WORKER)
    assert listener is not None
    try:
        with app.app_context():
            jobs.store_result.set(queue="mail").perform_later(1)
            solidq.perform_all_later(
                [jobs.store_result.set(queue=queue).new(2) for queue in ("b", "a", "b")]
            )
            jobs.store_result.set(queue="later", wait=60).perform_later(3)  # not ready: no ring
        assert [job_notices.decode_queues(message) for message in listener.drain()] == [
            ["mail"],
            ["a", "b"],
        ]
    finally:
        listener.close()


def test_a_ring_for_some_queues_reaches_only_the_workers_that_claim_from_them(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path}/queue.db")
    bell = HostBell(engine.url)
    selectors = {"mail": ("mail*",), "urgent": ("urgent",), "every": ("*",)}
    listeners = {
        name: bell.listen(WORKER, job_notices.worker_tag(QueueSelector(queues)))
        for name, queues in selectors.items()
    }
    untagged = bell.listen(WORKER)  # a socket without a tag hears every ring
    try:
        job_notices.announce_ready(engine, notified=False, queues=["mailer"])
        heard = {name: bool(listener.drain()) for name, listener in listeners.items()}
        assert heard == {"mail": True, "urgent": False, "every": True}
        assert untagged.drain() == [job_notices.encode_queues(["mailer"])]
    finally:
        for listener in [*listeners.values(), untagged]:
            listener.close()
        engine.dispose()


def test_a_tag_too_long_for_the_socket_name_is_left_out(tmp_path):
    bell = HostBell(sa.make_url(f"sqlite:///{tmp_path}/queue.db"))
    listener = bell.listen(WORKER, "x" * 300)
    try:
        assert "." not in os.path.basename(listener.path).removesuffix(".sock")
        bell.ring(WORKER, b"hi", only=lambda _tag: False)
        assert listener.drain() == [b"hi"]
    finally:
        listener.close()
