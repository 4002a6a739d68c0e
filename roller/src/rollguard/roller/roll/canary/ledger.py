"""The canary's sends and arrivals as it counts them (`canary.client.Canary`): each send recorded
when sent, then answered once, acknowledged or failed, or given up as failed when its producer
is replaced (`abandon`); an answer that comes after that is not counted again. Thread-safe:
kafka-python answers from its own threads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from rollguard.roller.model import CanaryArrival, CanarySample


class Ledger:
    """What the canary sent, what was answered and what arrived, read at any time with
    `snapshot()`; `warm` is set once every partition's first send was acknowledged."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._samples: list[CanarySample] = []
        self._arrivals: list[CanaryArrival] = []
        self._pending: dict[int, tuple[float, int | None]] = {}  # number -> (sent, partition)
        self.last_ack: float | None = None
        # Every partition's first send acknowledged: a connection to each leader made (each
        # first send to a broker pays for it), what a client sees in steady state from then.
        self.warm = threading.Event()
        self._warm_partitions: set[int] = set()
        self.partitions = 0  # how many the topic has, once the producer knows

    def sent(self, number: int, partition: int | None) -> None:
        with self._lock:
            self._pending[number] = (self.clock(), partition)

    def acknowledged(self, number: int) -> None:
        now = self.clock()
        with self._lock:
            answered = self._pending.pop(number, None)
            if answered is None:  # given up already: counted as failed then
                return
            sent, partition = answered
            self._samples.append(CanarySample(sent, now - sent, partition))
            self.last_ack = now
            if partition is not None and not self.warm.is_set():
                self._warm_partitions.add(partition)
                if len(self._warm_partitions) >= self.partitions:
                    self.warm.set()

    def failed(self, number: int) -> None:
        with self._lock:
            answered = self._pending.pop(number, None)
            if answered is not None:
                self._samples.append(CanarySample(answered[0], None, answered[1]))

    def abandon(self) -> int:
        """Every send still unanswered counted as failed now (its producer is gone): how many."""
        with self._lock:
            gone = [
                CanarySample(sent, None, partition) for sent, partition in self._pending.values()
            ]
            self._pending.clear()
            self._samples.extend(gone)
        return len(gone)

    def overdue(self, limit: float) -> bool:
        """A send has been unanswered for more than `limit` seconds."""
        now = self.clock()
        with self._lock:
            return any(now - sent > limit for sent, _ in self._pending.values())

    def arrived(self, arrivals: Iterable[CanaryArrival]) -> None:
        with self._lock:
            self._arrivals.extend(arrivals)

    def snapshot(self) -> tuple[list[CanarySample], list[CanaryArrival], list[float]]:
        """Every answered send, every arrival (in order), and when each unanswered send was
        sent."""
        with self._lock:
            unanswered = [sent for sent, _ in self._pending.values()]
            return list(self._samples), list(self._arrivals), unanswered
