"""Wake-ups between processes: the machine's datagram sockets, PostgreSQL's LISTEN/NOTIFY, and
the waker that sleeps on them."""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
import time

import pytest
import sqlalchemy as sa

from flask_solidq.operations.queue_selector import QueueSelector
from flask_solidq.processes import job_notices
from flask_solidq.processes.host_bell import DISPATCHER
from flask_solidq.processes.host_bell import WORKER
from flask_solidq.processes.host_bell import HostBell
from flask_solidq.processes.pg_listener import PostgresListener
from flask_solidq.processes.signal_safe_waker import Waker
from flask_solidq.storage import db
from flask_solidq.storage.dialects import postgresql
from flask_solidq.timing import utcnow
from tests import support


@pytest.fixture
def bell(tmp_path) -> HostBell:
    return HostBell(sa.make_url(f"sqlite:///{tmp_path}/queue.db"))


def test_a_ring_reaches_every_listener_of_its_kind_and_no_other(bell):
    workers = [bell.listen(WORKER), bell.listen(WORKER)]
    dispatcher = bell.listen(DISPATCHER)
    try:
        bell.ring(WORKER, b"hello")
        assert [listener.drain() for listener in workers] == [[b"hello"], [b"hello"]]
        assert dispatcher.drain() == []
    finally:
        for listener in [*workers, dispatcher]:
            listener.close()


def test_the_directory_is_private_to_this_user(bell):
    listener = bell.listen(WORKER)
    try:
        assert os.stat(bell.directory).st_mode & 0o777 == 0o700
        assert os.stat(os.path.dirname(bell.directory)).st_mode & 0o077 == 0
    finally:
        listener.close()


def test_each_database_has_its_own_directory(tmp_path):
    first = HostBell(sa.make_url(f"sqlite:///{tmp_path}/a.db"))
    second = HostBell(sa.make_url(f"sqlite:///{tmp_path}/b.db"))
    with_password = HostBell(sa.make_url("postgresql://u:secret@h/db"))
    other_password = HostBell(sa.make_url("postgresql://u:other@h/db"))
    assert first.directory != second.directory
    assert with_password.directory == other_password.directory


def test_a_socket_nobody_reads_is_removed_by_the_next_ring(bell):
    listener = bell.listen(WORKER)
    keeper = bell.listen(WORKER)
    listener.socket.close()  # its process died without closing it
    try:
        bell.ring(WORKER)
        assert not os.path.exists(listener.path)
        assert keeper.drain() == [b""]
    finally:
        keeper.close()


def test_the_last_socket_nobody_reads_takes_the_directory_with_it(bell):
    listener = bell.listen(WORKER)
    listener.socket.close()  # its process died without closing it
    assert bell.may_have_listeners()
    bell.ring(WORKER)
    assert not os.path.exists(bell.directory)
    assert not bell.may_have_listeners()


def test_a_worker_that_starts_after_an_unheard_announce_hears_the_next(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path}/queue.db")  # a machine of its own
    bell = job_notices._bell(engine)
    assert not bell.may_have_listeners()  # no worker on this machine: nothing is listed
    job_notices.announce_ready(engine, notified=False, queues=["default"])
    listener = bell.listen(WORKER, job_notices.worker_tag(QueueSelector(("default",))))
    try:
        assert bell.may_have_listeners()
        job_notices.announce_ready(engine, notified=False, queues=["default"])
        assert listener.drain() == [job_notices.encode_queues(["default"])]
    finally:
        listener.close()


def test_ringing_with_no_listener_does_nothing(bell):
    bell.ring(WORKER)  # no directory yet
    listener = bell.listen(WORKER)
    listener.close()
    assert not os.path.exists(bell.directory)
    bell.ring(WORKER)


def test_a_full_listener_does_not_block_the_ringer(bell):
    listener = bell.listen(WORKER)
    try:
        started = time.monotonic()
        for _ in range(5000):
            bell.ring(WORKER, b"x" * 200)
        assert time.monotonic() - started < 30
        assert listener.drain()
    finally:
        listener.close()


def test_the_waker_runs_a_watched_handler_and_sleeps_on_unless_it_rings():
    waker = Waker()
    left, right = socket.socketpair()
    heard = []

    def handler():
        heard.append(left.recv(10))
        if heard[-1] == b"wake":
            waker.ring()

    timers = [
        threading.Timer(0.05, lambda: right.send(b"ignore")),
        threading.Timer(0.15, lambda: right.send(b"wake")),
    ]
    try:
        for timer in timers:
            timer.start()
        started = time.monotonic()
        waker.sleep(10, [(left.fileno(), handler)])
        assert heard == [b"ignore", b"wake"]
        assert time.monotonic() - started < 5
    finally:
        for timer in timers:
            timer.join()
        waker.close()
        left.close()
        right.close()


def test_a_subscription_hands_on_the_time_a_dispatcher_was_rung_with(app):
    with app.app_context():
        engine = app.extensions["solidq"].engine
    heard: list[dt.datetime | None] = []
    subscription = job_notices.Subscription(
        engine, DISPATCHER, lambda payload: heard.append(job_notices.decode_time(payload))
    )
    at = utcnow() + dt.timedelta(seconds=3)
    try:
        job_notices.announce_scheduled(engine, at, notified=False)
        if db.supports_listen_notify(engine):
            with db.write(engine) as connection:
                db.notify(
                    connection, postgresql.SCHEDULED_CHANNEL, job_notices.encode_time(at).decode()
                )
        waker = Waker()
        support.wait_until(lambda: waker.sleep(0.05, subscription.watched()) or heard)
        waker.close()
    finally:
        subscription.close()
    assert abs((heard[0] - at).total_seconds()) < 1e-3


def test_postgres_listeners_hear_a_notify_only_when_its_transaction_commits(app):
    with app.app_context():
        engine = app.extensions["solidq"].engine
    if not db.supports_listen_notify(engine):
        assert engine.dialect.name != "postgresql"
        return
    listener = PostgresListener(engine, [postgresql.READY_CHANNEL])
    try:
        assert listener.open()
        with pytest.raises(RuntimeError), db.write(engine) as connection:
            db.notify(connection, postgresql.READY_CHANNEL)
            raise RuntimeError("roll back")
        with db.write(engine) as connection:
            db.notify(connection, postgresql.READY_CHANNEL, "committed")
        heard = support.wait_until(listener.drain)
        assert heard == [(postgresql.READY_CHANNEL, "committed")]
    finally:
        listener.close()


def test_a_lost_postgres_listener_is_noticed_and_opened_again(app, caplog):
    with app.app_context():
        engine = app.extensions["solidq"].engine
    if not db.supports_listen_notify(engine):
        return
    caplog.set_level("INFO", logger="flask_solidq")  # a listener that worked: INFO
    listener = PostgresListener(engine, [postgresql.READY_CHANNEL])
    try:
        assert listener.open()
        backend_pid = listener._connection.info.backend_pid
        with db.autocommit(engine) as connection:
            connection.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": backend_pid})
        support.wait_until(lambda: listener.drain() == [] and listener._connection is None)
        assert "can't listen for wake-ups" in caplog.text
        assert listener.open()
        with db.write(engine) as connection:
            db.notify(connection, postgresql.READY_CHANNEL, "again")
        assert support.wait_until(listener.drain) == [(postgresql.READY_CHANNEL, "again")]
    finally:
        listener.close()


def test_a_subscription_listens_from_the_moment_it_is_made(app):
    """A process makes its subscription before its first poll: what is notified between that
    poll and its first sleep is heard (the listener used to connect only at the first sleep,
    and a job made ready in between waited a whole polling interval)."""
    with app.app_context():
        engine = app.extensions["solidq"].engine
    heard: list[bytes | str] = []
    subscription = job_notices.Subscription(engine, WORKER, heard.append)
    try:
        if db.supports_listen_notify(engine):
            with db.write(engine) as connection:
                db.notify(connection, postgresql.READY_CHANNEL, "before the first sleep")
        else:
            job_notices.announce_ready(engine, notified=False, queues=["default"])
        waker = Waker()
        support.wait_until(lambda: waker.sleep(0.05, subscription.watched()) or heard)
        waker.close()
    finally:
        subscription.close()
    assert heard in (["before the first sleep"], [b'["default"]'])


def test_a_subscription_whose_listener_comes_back_polls_once_for_what_it_missed(app):
    with app.app_context():
        engine = app.extensions["solidq"].engine
    if not db.supports_listen_notify(engine):
        assert engine.dialect.name != "postgresql"
        return
    gaps: list[str] = []
    subscription = job_notices.Subscription(
        engine, WORKER, lambda payload: None, on_gap=lambda: gaps.append("gap")
    )
    waker = Waker()
    try:
        assert waker.sleep(0.01, subscription.watched()) is None and gaps == []
        backend_pid = subscription._database._connection.info.backend_pid
        with db.autocommit(engine) as connection:
            connection.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": backend_pid})
        support.wait_until(lambda: waker.sleep(0.05, subscription.watched()) or gaps)
        assert gaps == ["gap"]
    finally:
        waker.close()
        subscription.close()
