"""What the real-Kafka test modules share: a started cluster with agents, topics and data, the
agent read through curl, `rollguard roll` run as operators run it (defaults, no tuning: the
harness's `InventoryRoll`), and the test's own eyes on a roll (`watched`)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollguard.peers.harness import InventoryRoll
from rollguard.peers.realclients import Canary, IsrSampler
from rollguard.peers.realcluster import RealCluster

ROLL_ID = "real-1"


@dataclass
class Seen:
    """One look at a node through its agent."""

    at: float
    status: int
    body: dict[str, Any]

    @property
    def state(self) -> int | None:
        value = self.body.get("brokerState")
        return value if isinstance(value, int) else None

    @property
    def recovery(self) -> dict[str, Any] | None:
        value = self.body.get("recovery")
        return value if isinstance(value, dict) else None


def kafka_build_logged(log: str) -> tuple[str, str]:
    """The version and commit id Kafka logged at its latest start ("Kafka version: 4.4.0",
    "Kafka commitId: ..."; AppInfoParser): the node's own word, not its agent's."""
    versions = re.findall(r"Kafka version: (\S+)", log)
    commits = re.findall(r"Kafka commitId: (\S+)", log)
    assert versions and commits, "the node's log does not say its Kafka version and commit"
    return versions[-1], commits[-1]


def look(cluster: RealCluster, node_id: int) -> Seen:
    answer = cluster.agents[node_id].state()
    try:
        body = answer.json()
    except ValueError:
        body = {}
    return Seen(time.monotonic(), answer.status, body if isinstance(body, dict) else {})


def follow(cluster: RealCluster, node_id: int, until: float, every: float = 0.2) -> Iterator[Seen]:
    """The node's agent read every `every` seconds until `until` (monotonic)."""
    while time.monotonic() < until:
        yield look(cluster, node_id)
        time.sleep(every)


def as_operator(
    cluster: RealCluster, folder: Path, roll_id: str = ROLL_ID, **fields: Any
) -> InventoryRoll:
    """Rolls of the real cluster as its operator runs them: the roll's own timings, its state
    in folder/state, each given 15 minutes (`fields`: the target's others, an `inventory`)."""
    return InventoryRoll(cluster, folder, roll_id, timeout=900, **fields)


def until_running_again(
    cluster: RealCluster, node_id: int, before: str, since: float
) -> list[Seen]:
    """The node's agent read until it reports RUNNING for a JVM other than `before` (its
    `brokerStartedAt`), within 240 s of `since`; every answer, in order."""
    seen: list[Seen] = []
    for answer in follow(cluster, node_id, until=since + 240):
        seen.append(answer)
        if answer.state == 3 and answer.body.get("brokerStartedAt") != before:
            return seen
    raise AssertionError(f"node {node_id} not RUNNING again: last answers {seen[-5:]}")


def assert_one_stretch_of_recovering(phases: list[str]) -> None:
    """A real recovery's phases, read by the agent: `loading` until a thread has a log's segments
    to recover (the first reads, on a slow start), then `recovering` in one stretch, then
    possibly `loading` again for the last reads (Kafka removes the replay's segment gauges before
    the logs gauge). Never `recovering` again after that: the phase does not flap."""
    assert "recovering" in phases, phases
    first = phases.index("recovering")
    last = len(phases) - phases[::-1].index("recovering")
    assert set(phases[:first]) <= {"loading"} and set(phases[last:]) <= {"loading"}, phases
    assert set(phases[first:last]) == {"recovering"}, phases


@dataclass
class Watch:
    """The test's own eyes on a real cluster during a roll: the control server's restart log
    (each restart's time, and every node's phase then from its own log), an ISR and quorum
    sampler and a canary. Never the product's agent, events or metrics."""

    cluster: RealCluster
    isr: IsrSampler
    canary: Canary
    began: float = 0.0
    ended: float = 0.0

    def assert_safe(self, *, max_gap: float = 2.0, together: float = 0.0) -> None:
        """No restart while the node itself loaded or recovered its logs nor while another
        was not back (but a batch's, restarted within `together` seconds of each other), never
        below min ISR nor leaderless, never blind for more than `max_gap` seconds, every canary
        send acknowledged and read back. Missing data fails."""
        unsafe = self.cluster.restarts.unsafe(together=together)
        assert unsafe == [], unsafe
        self.isr.assert_watched(max_gap=max_gap, elections=self.elections())
        self.canary.report().assert_no_harm()

    def elections(self) -> list[tuple[float, float]]:
        """After each restart of the quorum's leader (by the sampler's own answers), the
        seconds the quorum may take to elect another."""
        restarts = [(r.at, r.node_id) for r in self.cluster.restarts.log]
        return self.isr.elections(restarts) if self.isr.quorum else []

    def summary(self) -> str:
        report = self.canary.report()
        return (
            f"{self.ended - self.began:.0f} s watched; ISR sampler {self.isr.samples} samples, "
            f"longest gap {self.isr.longest_gap():.2f} s, {len(self.isr.errors)} errors, "
            f"{self.isr.retried} attempts retried; {len(self.elections())} elections; "
            f"canary {report.row()}"
        )


@contextlib.contextmanager
def watched(cluster: RealCluster, *, quorum: bool = False) -> Iterator[Watch]:
    """Watch `cluster` for the `with` block (its `canary` topic, min ISR 2 everywhere)."""
    kafka = cluster.kafka
    with (
        IsrSampler(kafka.bootstrap, {"*": 2}, quorum=quorum) as isr,
        Canary(kafka.bootstrap, "canary") as canary,
    ):
        watch = Watch(cluster, isr, canary, began=time.monotonic())
        yield watch
    watch.ended = time.monotonic()
