"""``signals.send``, what a job's run sends ``perform_start`` and ``perform`` with: blinker's
``Signal.send`` less its coroutine check for the receivers declared plain, the same
receivers otherwise (one sender's, any sender's, weak ones while alive, none while muted)."""

from __future__ import annotations

import gc
import inspect
import typing as t

import blinker
import pytest

from flask_solidq import signals
from flask_solidq.logging import subscriber as log_subscriber


class Sender:
    pass


@pytest.fixture
def signal() -> blinker.NamedSignal:
    return blinker.Namespace().signal("test-send")


def recorder(calls: list[tuple[str, object, dict[str, t.Any]]], name: str) -> t.Callable[..., None]:
    def receive(sender: object, **payload: t.Any) -> None:
        calls.append((name, sender, payload))

    return receive


def test_a_receiver_of_one_sender_gets_only_that_sender_s_sends(signal):
    calls: list[tuple[str, object, dict[str, t.Any]]] = []
    one, other = Sender(), Sender()
    of_one, of_any = recorder(calls, "of_one"), recorder(calls, "of_any")
    signal.connect(of_one, sender=one)
    signal.connect(of_any)

    signals.send(signal, one, job="a")
    signals.send(signal, other, job="b")
    signals.send(signal, None, job="c")

    assert sorted(calls, key=lambda call: call[0]) == [
        ("of_any", one, {"job": "a"}),
        ("of_any", other, {"job": "b"}),
        ("of_any", None, {"job": "c"}),
        ("of_one", one, {"job": "a"}),
    ]


def test_the_receivers_are_blinker_s_in_blinker_s_order(signal):
    calls: list[tuple[str, object, dict[str, t.Any]]] = []
    sender = Sender()
    for name in ("a", "b", "c", "d"):
        of = sender if name in "bd" else blinker.ANY
        signal.connect(recorder(calls, name), sender=of, weak=False)

    signal.send(sender)
    expected = [call[0] for call in calls]
    calls.clear()
    signals.send(signal, sender)

    assert [call[0] for call in calls] == expected
    assert sorted(expected) == ["a", "b", "c", "d"]


def test_a_muted_signal_sends_nothing(signal):
    calls: list[tuple[str, object, dict[str, t.Any]]] = []
    receiver = recorder(calls, "r")
    signal.connect(receiver)

    with signal.muted():
        signals.send(signal, None, job="a")

    assert calls == []


def test_a_weak_receiver_is_called_while_alive_and_dropped_once_collected(signal):
    calls: list[tuple[str, object, dict[str, t.Any]]] = []

    class Holder:
        def receive(self, sender: object, **payload: t.Any) -> None:
            calls.append(("method", sender, payload))

    holder = Holder()
    signal.connect(holder.receive)  # weak: a WeakMethod

    signals.send(signal, None, job="a")
    del holder
    gc.collect()
    signals.send(signal, None, job="b")

    assert calls == [("method", None, {"job": "a"})]
    assert not signal.receivers


def test_a_coroutine_receiver_raises_as_blinker_s_send_does(signal):
    async def receive(sender: object, **payload: t.Any) -> None:
        pass

    signal.connect(receive)

    with pytest.raises(RuntimeError, match="Cannot send to a coroutine function"):
        signal.send(None)
    with pytest.raises(RuntimeError, match="Cannot send to a coroutine function"):
        signals.send(signal, None)


def test_a_coroutine_function_can_t_be_declared_plain():
    async def receive(sender: object, **payload: t.Any) -> None:
        pass

    with pytest.raises(TypeError, match="coroutine function"):
        signals.declare_plain(receive)


def test_only_undeclared_receivers_are_asked_whether_they_are_coroutines(signal, monkeypatch):
    calls: list[tuple[str, object, dict[str, t.Any]]] = []
    declared, undeclared = recorder(calls, "declared"), recorder(calls, "undeclared")
    signals.declare_plain(declared)
    signal.connect(declared)
    signal.connect(undeclared)
    asked: list[object] = []
    real = inspect.iscoroutinefunction

    def ask(function: object) -> bool:
        asked.append(function)
        return real(function)

    monkeypatch.setattr(inspect, "iscoroutinefunction", ask)
    try:
        signals.send(signal, None)
    finally:
        signals._plain_receivers.pop(id(declared), None)

    assert asked == [undeclared]
    assert sorted(call[0] for call in calls) == ["declared", "undeclared"]


def test_a_signal_whose_send_was_replaced_is_sent_through_it(signal, monkeypatch):
    sent: list[tuple[object, dict[str, t.Any]]] = []
    monkeypatch.setattr(signal, "send", lambda sender, **payload: sent.append((sender, payload)))

    signals.send(signal, "s", job="a")

    assert sent == [("s", {"job": "a"})]


def test_the_log_subscriber_s_receivers_are_declared_plain():
    log_subscriber.connect()
    try:
        receivers = [receiver for _signal, receiver in log_subscriber._RECEIVERS]
        assert all(signals._plain_receivers.get(id(r)) is r for r in receivers)
    finally:
        log_subscriber.disconnect()
