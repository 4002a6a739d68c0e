"""Batch membership in the roll journal, `--resume` after a batch was cut short, and what the
Admin API observer adds for batches (racks, leaders, ElectLeaders against the Kafka peer)."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from rollguard.peers.harness_sim import SimRoll
from rollguard.peers.kafka import KafkaClusterSim, TopicSpec
from rollguard.peers.sim import (
    SimCluster,
    SimPlatform,
    VirtualClock,
    default_settings,
    make_roller,
    rack_cluster,
)
from rollguard.roller.agent_client import AgentClient
from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.roller.model import Node
from rollguard.roller.roll.node.record import How, NodeRecord, Phase
from rollguard.roller.roll.stores.journal import RollRecord

from helpers import wait_until


def test_batch_membership_round_trips_and_a_bad_one_is_refused() -> None:
    record = RollRecord("r1", "2026-01-01T00:00:00Z")
    record.nodes["kafka-0"] = NodeRecord(
        "kafka-0", Phase.RESTARTING, "t", reason="why", how=How.RESTART, instance="i0", batch=2
    )
    record.nodes["kafka-1"] = NodeRecord("kafka-1", Phase.DONE, "t", how=How.RESTART, instance="i1")
    data = record.to_json()
    assert data["nodes"]["kafka-0"]["batch"] == 2
    assert "batch" not in data["nodes"]["kafka-1"]
    again = RollRecord.from_json(json.loads(json.dumps(data)))
    assert again.nodes == record.nodes
    assert again.next_batch() == 3
    data["nodes"]["kafka-0"]["batch"] = "two"
    with pytest.raises(Exception, match="batch 'two'"):
        RollRecord.from_json(data)


class Interrupted(SimPlatform):
    """Restarts only the first member of the first batch, then the roller is killed."""

    def __init__(self, cluster: SimCluster, agents: AgentClient, folder: Path) -> None:
        super().__init__(cluster, agents, folder)
        self.calls = 0

    async def restart(self, node: Node, *, kafka_version: str | None = None) -> None:
        self.calls += 1
        if self.calls == 1:
            await super().restart(node, kafka_version=kafka_version)
            return
        raise asyncio.CancelledError  # killed between the two restarts of one batch


def test_resume_restarts_no_member_twice_and_replans_the_rest(tmp_path: Path) -> None:
    clock = VirtualClock()
    cluster = rack_cluster(random.Random(2), clock, 6, racks=3, min_isr=(2, 2), controllers=0)
    target = SimRoll(cluster, tmp_path, replace(default_settings(), max_batch_size=2))
    with pytest.raises(asyncio.CancelledError):
        replace(target, platform=Interrupted).roll()
    journal = target.journal()
    assert journal is not None and journal["state"] == "interrupted"
    cut = {n: r for n, r in journal["nodes"].items() if r.get("batch") == 1}
    assert len(cut) == 2 and all(r["phase"] == "restarting" for r in cut.values())
    first_member = next(e.name for e in cluster.log)

    done = target.roll(resume=True)
    assert done.returncode == 0, done.stderr
    assert all(n.restarts == 1 for n in cluster.nodes.values())
    v = cluster.violations
    assert (v.below_min_isr, v.offline, v.restarted_recovering) == ([], [], [])
    after = done.journal
    assert after is not None and after["state"] == "completed"
    assert after["nodes"][first_member]["batch"] == 1
    # The member that never restarted went back to the planner, into a later batch.
    (other,) = set(cut) - {first_member}
    assert after["nodes"][other]["batch"] > 1


def test_the_observer_reads_racks_and_leaders_and_elects_preferred_leaders() -> None:
    racks = {0: "a", 1: "b", 2: "c"}
    with KafkaClusterSim(
        (0, 1, 2),
        topics={"orders": TopicSpec(partitions=3, replication_factor=3, min_insync_replicas=2)},
        internal_topics=0,
        racks=racks,
        placement="rack_aware",
        rejoin_after=0.0,
    ) as kafka:
        observer = KafkaObserver(kafka.bootstrap)
        try:
            view = asyncio.run(observer.observe())
            assert view.rack_of() == racks
            assert {p.leader for p in view.partitions} == {p.replicas[0] for p in view.partitions}
            # Broker 1 (not the controller, voter 0) restarts and loses its leaderships.
            kafka.stop_broker(1)
            kafka.start_broker(1)
            moved = [(p.topic, p.partition) for p in view.partitions if p.replicas[0] == 1]
            wait_until(
                lambda: 1 in kafka.partition_state(*moved[0]).isr,
                timeout=20,
                what="broker 1 back in the ISR",
            )
            asyncio.run(observer.observe())  # the client learns the cluster as it is now
            assert kafka.partition_state(*moved[0]).leader != 1
            asyncio.run(observer.elect_preferred(moved))
            assert kafka.partition_state(*moved[0]).leader == 1
        finally:
            observer.close()


def test_make_roller_is_unchanged_for_serial_rolls(tmp_path: Path) -> None:
    cluster = rack_cluster(random.Random(1), VirtualClock(), 3, racks=3, controllers=0)
    roller = make_roller(cluster, tmp_path)
    assert roller.settings.max_batch_size == 1
    asyncio.run(roller.agents.aclose())
