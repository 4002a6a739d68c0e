"""The canary's count of its sends (`canary.ledger.Ledger`: each send answered once, given up
as failed when its producer goes, late answers not counted again), and the producer's
replacement when it leaves a send unanswered past its bound (`canary.client.Canary`, with
producers of the test's own: kafka-python's sender stopping for good cannot be caused on
demand on a real cluster)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from rollguard.roller.model import CanarySample as Sample
from rollguard.roller.roll.canary.client import Canary
from rollguard.roller.roll.canary.ledger import Ledger

from helpers import Clock, wait_until


def test_each_send_is_answered_once_and_a_late_answer_is_not_counted_again() -> None:
    clock = Clock(100.0)
    ledger = Ledger(clock)
    ledger.partitions = 2
    for number, partition in enumerate([0, 1, 0]):
        ledger.sent(number, partition)
        clock.now += 1.0
    ledger.acknowledged(0)
    ledger.failed(1)
    ledger.acknowledged(1)  # answered already
    samples, _, unanswered = ledger.snapshot()
    assert samples == [Sample(100.0, 3.0, 0), Sample(101.0, None, 1)]
    assert unanswered == [102.0]
    assert ledger.last_ack == 103.0
    assert not ledger.warm.is_set()  # partition 1 never acknowledged


def test_abandoned_sends_count_as_failed_once() -> None:
    clock = Clock(100.0)
    ledger = Ledger(clock)
    ledger.sent(0, 0)
    ledger.sent(1, 1)
    clock.now = 130.0
    assert ledger.overdue(20.0)
    assert not ledger.overdue(30.0)
    assert ledger.abandon() == 2
    ledger.acknowledged(0)  # the old producer answers after all: already counted as failed
    samples, _, unanswered = ledger.snapshot()
    assert samples == [Sample(100.0, None, 0), Sample(100.0, None, 1)]
    assert unanswered == [] and ledger.last_ack is None
    assert not ledger.overdue(0.0)


def test_warm_once_every_partition_had_a_send_acknowledged() -> None:
    ledger = Ledger(Clock(100.0))
    ledger.partitions = 2
    ledger.sent(0, 0)
    ledger.sent(1, 1)
    ledger.acknowledged(0)
    assert not ledger.warm.is_set()
    ledger.acknowledged(1)
    assert ledger.warm.is_set()


class Future:
    def __init__(self) -> None:
        self.callbacks: list[Any] = []

    def add_callback(self, callback: Any) -> None:
        self.callbacks.append(callback)

    def add_errback(self, errback: Any) -> None:
        pass


class Sender:
    def __init__(self) -> None:
        self.forced = False

    def force_close(self) -> None:
        self.forced = True


class Producer:
    """A producer of the test's own: a `silent` one never answers (as kafka-python's sender
    once stopped), and its close() raises as kafka-python's does with sends unanswered."""

    def __init__(self, *, silent: bool) -> None:
        self.silent = silent
        self.sent = 0
        self._sender = Sender()

    def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2}

    def send(self, topic: str, **_: Any) -> Future:
        self.sent += 1
        return Future() if self.silent else Answered()

    def flush(self, timeout: float) -> None:
        if self.silent:
            raise TimeoutError("Timeout waiting for future")

    def close(self, timeout: float) -> None:
        self.flush(timeout)


class Answered(Future):
    def add_callback(self, callback: Any) -> None:
        callback(None)


@pytest.mark.timeout(30)
def test_a_producer_that_leaves_a_send_unanswered_past_its_bound_is_replaced() -> None:
    made = [Producer(silent=True), Producer(silent=False)]
    canary = Canary(None, "canary", every=0.01, delivery_timeout=0.2)  # type: ignore[arg-type]
    producers = iter(made)
    canary._producer = lambda: next(producers)  # type: ignore[method-assign]
    thread = threading.Thread(target=canary._produce, daemon=True)
    thread.start()
    try:
        wait_until(lambda: canary.last_ack is not None, 10, what="a send acknowledged")
    finally:
        canary._stop.set()
        thread.join(10)
    silent, answering = made
    assert canary.renewals == 1
    assert silent._sender.forced  # its close() raised: its sender told to stop at once
    samples, _, unanswered = canary.samples()
    failed = [s for s in samples if s.latency is None]
    assert len(failed) == silent.sent > 0  # every send the silent one took, failed once
    assert len(samples) - len(failed) == answering.sent and unanswered == []
