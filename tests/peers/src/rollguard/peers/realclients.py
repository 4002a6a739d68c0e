"""Real Kafka clients that watch a roll from outside: an ISR sampler and a canary.

`IsrSampler` asks the Admin API for every partition's ISR (internal topics included) every
200 ms, independently of the roller, and keeps the worst it saw: a partition whose ISR went
below its min ISR, or that had no leader. `Canary` is what a roll costs clients: a producer
(acks=all, idempotent) sending a small record every 20 ms and a consumer reading them back;
it counts failed sends, keeps every send's latency, and the consumer's longest gap.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class IsrLow:
    topic: str
    partition: int
    isr: tuple[int, ...]
    min_isr: int
    at: float


class IsrSampler:
    """A thread describing every topic's partitions; `lows`: ISR below min ISR, or no leader."""

    def __init__(
        self,
        bootstrap: str,
        min_isr: dict[str, int],
        *,
        interval: float = 0.2,
        quorum: bool = False,
    ) -> None:
        self.bootstrap = bootstrap
        self.quorum = quorum  # also ask DescribeQuorum: `leaderless` counts answers without one
        self.leaderless = 0
        self.quorum_samples = 0
        self.min_isr = min_isr  # per topic; topics not named use "*"
        self.interval = interval
        self.lows: list[IsrLow] = []
        self.samples = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(
            bootstrap_servers=self.bootstrap, request_timeout_ms=3000, client_id="isr-sampler"
        )
        try:
            while not self._stop.is_set():
                try:
                    topics = admin.describe_topics()
                except Exception:
                    self.errors += 1
                    self._stop.wait(self.interval)
                    continue
                if self.quorum:
                    self._sample_quorum(admin)
                now = time.monotonic()
                self.samples += 1
                for topic in topics:
                    name = topic["name"]
                    wanted = self.min_isr.get(name, self.min_isr.get("*", 1))
                    for p in topic["partitions"]:
                        # Kafka keeps the last ISR member listed while it is offline
                        offline = set(p.get("offline_replicas") or ())
                        isr = tuple(r for r in p["isr_nodes"] if r not in offline)
                        leader = p.get("leader_id")
                        if len(isr) < wanted or leader is None or leader < 0:
                            self.lows.append(IsrLow(name, p["partition_index"], isr, wanted, now))
                self._stop.wait(self.interval)
        finally:
            admin.close()

    def _sample_quorum(self, admin: Any) -> None:
        try:
            quorum = admin.describe_metadata_quorum()
        except Exception:  # the node asked is restarting: not an answer
            return
        self.quorum_samples += 1
        try:
            leader = quorum["topics"][0]["partitions"][0]["leader_id"]
        except (KeyError, IndexError, TypeError):
            leader = -1
        if not isinstance(leader, int) or leader < 0:
            self.leaderless += 1

    def __enter__(self) -> IsrSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


@dataclass
class CanaryReport:
    sent: int
    failed: int
    received: int
    p99_ms: float
    median_ms: float
    longest_gap_s: float
    errors: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "failed": self.failed,
            "received": self.received,
            "p99SendMs": round(self.p99_ms, 1),
            "medianSendMs": round(self.median_ms, 1),
            "longestConsumerGapS": round(self.longest_gap_s, 2),
        }


class Canary:
    """A producer and a consumer on `topic` for as long as the `with` block lasts."""

    def __init__(self, bootstrap: str, topic: str, *, every: float = 0.02) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.every = every
        self.latencies: list[float] = []
        self.failed = 0
        self.sent = 0
        self.received = 0
        self.longest_gap = 0.0
        self.errors: list[str] = []
        self.consumer_errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._consumer_ready = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def _produce(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            delivery_timeout_ms=120000,
            request_timeout_ms=30000,
            client_id="canary-producer",
        )
        self._consumer_ready.wait(30)
        try:
            while not self._stop.is_set():
                started = time.monotonic()

                def done(_: object, started: float = started) -> None:
                    with self._lock:
                        self.latencies.append(time.monotonic() - started)

                def failed(error: BaseException) -> None:
                    with self._lock:
                        self.failed += 1
                        if len(self.errors) < 10:
                            self.errors.append(repr(error))

                future = producer.send(self.topic, b"canary %d" % self.sent)
                future.add_callback(done)
                future.add_errback(failed)
                self.sent += 1
                self._stop.wait(self.every)
            producer.flush(60)
        finally:
            producer.close(10)

    def _consume(self) -> None:
        """Count what arrives and the longest gap; a consumer that raises out of poll() (when
        no broker answers, in a cluster-wide outage) is replaced, and the gap goes on."""
        from kafka import KafkaConsumer

        last: float | None = None
        while not self._stop.is_set():
            try:
                consumer = KafkaConsumer(
                    self.topic,
                    bootstrap_servers=self.bootstrap,
                    group_id="canary",
                    auto_offset_reset="latest",
                    client_id="canary-consumer",
                )
            except Exception as error:  # no broker answers: try again in a second
                self.consumer_errors.append(repr(error)[:200])
                self._stop.wait(1)
                continue
            try:
                while not self._stop.is_set():
                    batches = consumer.poll(timeout_ms=200)
                    if consumer.assignment() and not self._consumer_ready.is_set():
                        self._consumer_ready.set()
                    count = sum(len(records) for records in batches.values())
                    now = time.monotonic()
                    if count:
                        if last is not None:
                            self.longest_gap = max(self.longest_gap, now - last)
                        last = now
                        self.received += count
            except Exception as error:  # the cluster went away under it
                self.consumer_errors.append(repr(error)[:200])
            finally:
                with contextlib.suppress(Exception):
                    consumer.close()
        if last is not None:  # a gap still open when the canary stops counts too
            self.longest_gap = max(self.longest_gap, time.monotonic() - last)

    def report(self) -> CanaryReport:
        latencies = sorted(self.latencies) or [0.0]
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        return CanaryReport(
            self.sent,
            self.failed,
            self.received,
            p99 * 1000,
            statistics.median(latencies) * 1000,
            self.longest_gap,
            list(self.errors),
        )

    def __enter__(self) -> Canary:
        for thread in self._threads:
            thread.start()
        self._consumer_ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(90)
