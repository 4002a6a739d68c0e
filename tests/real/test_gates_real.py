"""The roll's Prometheus and consumer-lag gates end to end: the installed `rollguard roll` on a
real Kafka, a real Prometheus (Debian's, `make prometheus`) and a real consumer group.

One cluster for the module, as small as a roll can be: a single combined KRaft node (its
topics and internal topics at replication 1, min ISR 1) with its `rollguard-agent`; a roll
restarts it once. Prometheus scrapes a tiny exporter served here, whose gauge the test sets;
its rule fires `RollguardHold` (label rollguard="hold") while the gauge is 1. Each roll runs in
the background and is watched through its events file: every wait has a deadline, and nothing
sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from rollguard.peers.processes import free_port
from rollguard.peers.realcluster import RealCluster
from rollguard.peers.realkafka import KafkaCluster
from rollguard.peers.realprometheus import PrometheusMissing, PrometheusServer
from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.roller.roll.gates.lag import ConsumerLagGate, LagLimit

from helpers import Pki, missing_tier, wait_until
from real_kafka import as_operator

QUERY = 'ALERTS{alertstate="firing",rollguard="hold"}'
RULES = """\
groups:
  - name: rollguard-test
    rules:
      - alert: RollguardHold
        expr: rollguard_test_hold == 1
        for: 0s
        labels:
          rollguard: hold
"""
TOPIC, GROUP, MESSAGES, MAX_LAG = "orders", "orders-app", 300, 100
# One node: what Kafka makes at replication 3 by default is made at 1.
SINGLE_NODE = {
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
# The roll looks twice a second.
ROLL_FLAGS = ("--poll-interval", "500ms")
HELD = ("--safety-wait", "2m")  # a held roll that should go on: never reached when it does


@dataclass
class Exporter:
    """What Prometheus scrapes: one gauge, `rollguard_test_hold`, set by the test; and the
    roller's own metrics (`--metrics-listen` on `roller`, while a roll runs)."""

    hold: Gauge
    target: str
    roller: str = field(default_factory=lambda: f"127.0.0.1:{free_port()}")


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    registry = CollectorRegistry()
    hold = Gauge("rollguard_test_hold", "1 holds the roll (rule RollguardHold)", registry=registry)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield Exporter(hold, f"127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def prometheus(
    exporter: Exporter, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    try:
        server = PrometheusServer(
            tmp_path_factory.mktemp("prometheus"),
            targets=[exporter.target, exporter.roller],
            rules=RULES,
        )
    except PrometheusMissing as missing:
        missing_tier(str(missing))
    with server:
        yield server


@pytest.fixture(scope="module")
def cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    folder = tmp_path_factory.mktemp("gates-real")
    kafka = KafkaCluster(
        folder / "kafka", combined=1, heap="256m", min_insync_replicas=1, extra=SINGLE_NODE
    )
    try:
        kafka.start()
        kafka.create_topics([(TOPIC, 3, 1)])
        kafka.make_consumer_offsets()
        with RealCluster(kafka, pki, folder, name="gates") as real:
            yield real
    finally:
        kafka.stop()


class Stoppable(Protocol):
    def stop(self) -> None: ...


@pytest.fixture
def rolls() -> Iterator[list[Stoppable]]:
    """Every roll (and watch) a test starts, stopped if the test fails while it runs."""
    started: list[Stoppable] = []
    yield started
    for roll in started:
        roll.stop()


def restarts(cluster: RealCluster) -> int:
    return len(cluster.restarts.log)


class FiringWatch:
    """The test's own poll of the alert, every 0.2 s in a thread: `seen`, the monotonic moments
    Prometheus answered that it fires. A restart before the last of them broke the gate."""

    def __init__(self, prometheus: PrometheusServer) -> None:
        self.seen: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(prometheus,), daemon=True)
        self._thread.start()
        wait_until(lambda: self.seen, 30, interval=0.05, what="the alert seen firing")

    def _run(self, prometheus: PrometheusServer) -> None:
        while True:
            asked = time.monotonic()
            with contextlib.suppress(Exception):  # a failed query sees nothing: proves nothing
                if prometheus.query(QUERY):
                    self.seen.append(asked)
            if self._stop.wait(0.2):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.mark.timeout(240)
def test_a_firing_alert_holds_the_roll_until_it_resolves(
    prometheus: PrometheusServer,
    exporter: Exporter,
    cluster: RealCluster,
    rolls: list[Stoppable],
    tmp_path: Path,
) -> None:
    exporter.hold.set(1)
    wait_until(lambda: prometheus.query(QUERY), 30, interval=0.2, what="RollguardHold firing")
    before = restarts(cluster)
    firing = FiringWatch(prometheus)  # the test's own eyes on the alert, beside the roller's
    rolls.append(firing)
    roll = as_operator(cluster, tmp_path, "gate-alert").start(
        *ROLL_FLAGS, *HELD, "--gate-prometheus", prometheus.url,
        "--gate-query", QUERY, "--metrics-listen", exporter.roller,
    )  # fmt: skip
    rolls.append(roll)

    closed = roll.until_gate_closed("prometheus")
    assert closed["name"] == QUERY and closed["deficit"] == 1 and closed["node"] is None
    assert 'alertname="RollguardHold"' in closed["reason"] and QUERY in closed["reason"]
    said = f"prometheus gate: query {QUERY} returns"
    wait_until(lambda: said in roll.stderr(), 10, what="stderr naming it")
    # held: the roll asks again at its next polls (Prometheus counts them), restarting nothing
    asked = prometheus.queries_answered()
    wait_until(lambda: prometheus.queries_answered() >= asked + 3, 30, what="three more polls")
    held_at = time.monotonic()
    assert restarts(cluster) == before and "restart" not in roll.events().actions()
    # The roll's own metrics, scraped by the same real Prometheus: held by that gate, 1 node
    # pending, the lease held.
    closed_now = 'rollguard_roll_gate_closed{gate="prometheus"} == 1'
    wait_until(lambda: prometheus.query(closed_now), 30, interval=0.5, what="the held roll scraped")
    for promql in ('rollguard_roll_nodes{state="pending"} == 1', "rollguard_roll_lease_held == 1"):
        assert prometheus.query(promql), promql
    scrape = httpx.get(f"http://{exporter.roller}/metrics", timeout=5).text
    (tmp_path / "scrape.txt").write_text(scrape)  # kept for the record (pytest's tmp dir)
    print(f"the held roll's metrics:\n{scrape}")

    exporter.hold.set(0)
    done = roll.wait()
    assert done.returncode == 0, done.output
    firing.stop()
    assert restarts(cluster) == before + 1
    # By the control server's log and the test's own queries, not the roller's events: the
    # one restart came after the last moment the test saw the alert firing, and the roll was
    # held while it fired, through three of its polls (the scenario really happened).
    (restart,) = cluster.restarts.log[before:]
    assert firing.seen and restart.at > max(firing.seen), (restart, firing.seen[-3:])
    assert min(firing.seen) < roll.started and max(firing.seen) >= held_at, firing.seen
    actions = done.actions()
    assert actions.index("gate-open") < actions.index("restart"), actions


@pytest.mark.timeout(240)
def test_a_consumer_group_lagging_more_than_its_max_holds_the_roll_until_it_catches_up(
    cluster: RealCluster, rolls: list[Stoppable], tmp_path: Path
) -> None:
    bootstrap = cluster.kafka.bootstrap
    partitions = [TopicPartition(TOPIC, p) for p in range(3)]
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for n in range(MESSAGES):
            producer.send(TOPIC, f"order {n}".encode())
        producer.flush(30)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        consumer.assign(partitions)
        # the group has read nothing yet: every message is lag
        consumer.commit({tp: OffsetAndMetadata(0, "", -1) for tp in partitions})
        before = restarts(cluster)
        roll = as_operator(cluster, tmp_path, "gate-lag").start(
            *ROLL_FLAGS, *HELD, "--gate-consumer-lag", f"{GROUP}={MAX_LAG}"
        )
        rolls.append(roll)

        closed = roll.until_gate_closed("consumer-lag")
        assert closed["name"] == GROUP and closed["deficit"] == MESSAGES - MAX_LAG
        assert (
            f"consumer group {GROUP} lags {MESSAGES} messages (more than {MAX_LAG})"
            in (closed["reason"])
        )
        assert restarts(cluster) == before and "restart" not in roll.events().actions()
        # the test's own reading of the lag while the roll is held: more than its max
        ends = consumer.end_offsets(partitions)
        assert sum(ends.values()) - 0 > MAX_LAG, ends

        read = 0

        def caught_up() -> bool:
            nonlocal read
            read += sum(len(batch) for batch in consumer.poll(500).values())
            return read >= MESSAGES

        wait_until(caught_up, 60, interval=0, what=f"the consumer to read {MESSAGES} messages")
        lagging_until = time.monotonic()  # the group lagged by more than its max until now
        consumer.commit()
    finally:
        consumer.close()
    done = roll.wait()
    assert done.returncode == 0, done.output
    assert restarts(cluster) == before + 1
    # the control server's log: the restart came only once the group had caught up
    (restart,) = cluster.restarts.log[before:]
    assert restart.at > lagging_until, (restart, lagging_until)
    actions = done.actions()
    assert actions.index("gate-open") < actions.index("restart"), actions


def test_the_lag_reader_sums_each_partition_and_an_unknown_group_or_kafka_closes_the_gate(
    cluster: RealCluster,
) -> None:
    bootstrap = cluster.kafka.bootstrap
    cluster.kafka.create_topics([("ledger", 2, 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for partition, count in ((0, 10), (1, 5)):
            for n in range(count):
                producer.send("ledger", f"entry {n}".encode(), partition=partition)
        producer.flush(30)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="ledger-app")
    try:
        consumer.commit(
            {
                TopicPartition("ledger", 0): OffsetAndMetadata(4, "", -1),
                TopicPartition("ledger", 1): OffsetAndMetadata(5, "", -1),
            }
        )
    finally:
        consumer.close()

    async def lag(server: str, group: str) -> Any:
        observer = KafkaObserver(server)
        try:
            return await observer.consumer_lag(group)
        finally:
            observer.close()

    async def check(server: str, group: str) -> Any:
        observer = KafkaObserver(server)
        try:
            return await ConsumerLagGate(LagLimit(group, 10), observer.consumer_lag).check()
        finally:
            observer.close()

    assert asyncio.run(lag(bootstrap, "ledger-app")) == (10 - 4) + (5 - 5)
    unknown = asyncio.run(check(bootstrap, "nobody-reads-this"))
    assert unknown is not None and unknown.reason == (
        "the lag of consumer group nobody-reads-this cannot be read: no committed offsets (an "
        "unknown group, or one that never committed)"
    )
    closed_port = f"127.0.0.1:{free_port()}"
    unreachable = asyncio.run(check(closed_port, GROUP))
    assert unreachable is not None and unreachable.reason == (
        f"the lag of consumer group {GROUP} cannot be read: Kafka Admin API at {closed_port}: "
        f"{closed_port} refused the connection"
    )


@pytest.mark.timeout(180)
def test_an_unreachable_prometheus_holds_the_roll_which_fails_at_the_safety_wait(
    prometheus: PrometheusServer, cluster: RealCluster, tmp_path: Path
) -> None:
    before = restarts(cluster)
    prometheus.stop()
    try:
        done = as_operator(cluster, tmp_path, "gate-down").roll(
            *ROLL_FLAGS, "--safety-wait", "3s",
            "--gate-prometheus", prometheus.url, "--gate-query", QUERY, timeout=120,
        )  # fmt: skip
    finally:
        prometheus.start()
    assert done.returncode == 1, done.stdout + done.stderr
    unreadable = (
        f"Prometheus at {prometheus.url} cannot be read: cannot connect: connection refused"
    )
    assert unreadable in done.stderr and "--safety-wait" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert restarts(cluster) == before
    closed = done.of("gate-closed")
    assert closed and unreadable in closed[0]["reason"]
    assert "restart" not in done.actions()
