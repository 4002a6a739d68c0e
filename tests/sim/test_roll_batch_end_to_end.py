"""A batch roll as operators run it, against real processes (`rollguard.peers.cluster`).

Six brokers in three racks (broker i in rack a, b, c for i mod 3), every topic (internal ones
too) placed rack-aware with replication 3 and min.insync.replicas 2, `--max-batch-size 2`; one
broker comes back from its restart into a log recovery. What is checked comes from the Kafka
peer's own record, not from the roller: the ISR sizes over time, and when each broker stopped
and started.
"""

from __future__ import annotations

from pathlib import Path

from rollguard.peers.cluster import NodePlan, ProcessCluster
from rollguard.peers.harness import InventoryRoll
from rollguard.peers.kafka import TopicSpec

from helpers import Pki

RACKS = {i: "abc"[i % 3] for i in range(6)}
TOPICS = {"orders": TopicSpec(partitions=6, replication_factor=3, min_insync_replicas=2)}
RECOVERING = 0  # in the first batch; its recovery must hold the second


def six_in_three_racks(pki: Pki, folder: Path) -> ProcessCluster:
    return ProcessCluster(
        pki,
        folder,
        6,
        {RECOVERING: NodePlan(recovery_ms=6000)},
        controller_only=1,
        combined=False,
        topics=TOPICS,
        catch_up=dict.fromkeys(range(6), 1.0),
        kafka={
            "racks": RACKS,
            "placement": "rack_aware",
            "broker_min_insync_replicas": 2,
            "internal_topics": 6,
            # As KRaft answers: the controller id a client sees is a broker, not controller 6.
            "controller_id_from": "random_alive_broker",
        },
    )


def test_six_brokers_in_three_racks_roll_in_three_batches_of_two(pki: Pki, tmp_path: Path) -> None:
    with six_in_three_racks(pki, tmp_path) as cluster:
        # The controller is left out: this test is about the brokers' batches.
        target = InventoryRoll(cluster, tmp_path)
        plan = target.plan("--skip", "kafka-6", "--max-batch-size", "2", "--output", "json")
        assert plan.returncode == 0, plan.stderr
        batches = {(e["batch"], e["rack"]) for e in plan.entries() if "batch" in e}
        assert batches == {(1, "a"), (2, "b"), (3, "c")}

        done = target.roll("--skip", "kafka-6", "--max-batch-size", "2", timeout=180)
        assert done.returncode == 0, done.stderr
        assert [n.restarts for n in cluster.nodes.values()] == [1, 1, 1, 1, 1, 1, 0]

        restarts = done.of("restart")
        groups: dict[object, list[str]] = {}
        for e in restarts:
            groups.setdefault(e["batch"], []).append(str(e["node"]))
        assert [sorted(g) for g in groups.values()] == [
            ["kafka-0", "kafka-3"],
            ["kafka-1", "kafka-4"],
            ["kafka-2", "kafka-5"],
        ]
        assert [e["rack"] for e in restarts] == ["a", "a", "b", "b", "c", "c"]

        # Nothing below min ISR at any moment, by the peer's own record.
        history = cluster.kafka.isr_history()
        lowest: dict[tuple[str, int], int] = {}
        for _, key, size in history:
            lowest[key] = min(lowest.get(key, size), size)
        assert len(lowest) == 6 + 2 * 6
        for (topic, index), size in lowest.items():
            assert size >= cluster.kafka.min_insync_replicas(topic), (topic, index, size)
        # Each batch did take one replica of every partition it touched out: the check bites.
        assert min(lowest.values()) == 2

        # The recovering broker held the second batch: it came back (after its recovery)
        # before the second batch's brokers were stopped, and was never restarted again.
        phases = cluster.kafka.phase_history()
        back = min(t for t, b, phase in phases if b == RECOVERING and phase == "fenced")
        second = [t for t, b, phase in phases if b in (1, 4) and phase == "stopped"]
        assert second and min(second) >= back
        assert done.of("wait-recovery", f"kafka-{RECOVERING}")

        # Leadership is back on the preferred replicas (ElectLeaders after each batch).
        assert len(done.of("elect-leaders")) == 3
        for topic, spec in cluster.kafka.topics().items():
            for index in range(spec.partitions):
                state = cluster.kafka.partition_state(topic, index)
                assert state.leader == state.replicas[0], state


def test_without_elections_leadership_stays_where_the_batches_left_it(
    pki: Pki, tmp_path: Path
) -> None:
    with ProcessCluster(
        pki,
        tmp_path,
        3,
        controller_only=1,
        combined=False,
        topics={"orders": TopicSpec(partitions=3, replication_factor=2, min_insync_replicas=1)},
        catch_up=dict.fromkeys(range(3), 0.5),
        kafka={"internal_topics": 0, "controller_id_from": "random_alive_broker"},
    ) as cluster:
        done = InventoryRoll(cluster, tmp_path).roll(
            "--skip", "kafka-3", "--max-batch-size", "3", "--elect-preferred-leaders", "false"
        )
        assert done.returncode == 0, done.stderr
        assert not done.of("elect-leaders")
        leaders = [cluster.kafka.partition_state("orders", i) for i in range(3)]
        assert any(state.leader != state.replicas[0] for state in leaders)
