"""A simulated cluster on a virtual clock, for property tests and `bench/roll_sim.py`.

Nodes restart, start, recover and become ready on a virtual clock: no real sleeping. The roller
under test is the production `Roller` with its production `AgentClient`; only the transport
under httpx (a `MockTransport` answering from the simulation, the seam httpx offers for this)
and the platform are simulated. Every restart is checked as it happens: restarting a broker in
RECOVERY, or taking a partition below min.insync.replicas, is counted as a violation.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
from dataclasses import dataclass, field

import httpx

from roller.agent_client import AgentClient
from roller.journal import EventLog, FileJournalStore
from roller.model import ClusterView, Node, PartitionInfo, PlatformView, QuorumInfo, Role, VoterInfo
from roller.roll import Roller, RollFailed, RollSettings
from shared.retry import RetryPolicy
from shared.states import BrokerState


class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)
        await asyncio.sleep(0)


@dataclass
class SimNode:
    node: Node
    down_until: float = -1.0  # not running before this (restarting)
    recovery_until: float = -1.0  # in RECOVERY before this (after down_until)
    recovery_segments: int = 0
    stall_at: float | None = None  # recovery makes no progress after this moment
    restarts: int = 0
    restart_seconds: float = 60.0
    recovery_after_restart: float = 0.0  # seconds of recovery the next restart brings

    def state(self, now: float) -> BrokerState:
        if now < self.down_until:
            return BrokerState.STARTING
        if now < self.recovery_until or (
            self.stall_at is not None and now >= self.stall_at and self.recovery_until > 0
        ):
            return BrokerState.RECOVERY
        return BrokerState.RUNNING

    def remaining(self, now: float) -> tuple[int, int]:
        start = self.down_until
        total = self.recovery_until - start
        moment = now if self.stall_at is None else min(now, self.stall_at)
        left = max(0.0, 1 - (moment - start) / total) if total > 0 else 0.0
        segments = int(self.recovery_segments * left + 0.999)
        return max(1, segments // 20) if segments else 0, segments


@dataclass
class Violations:
    restarted_recovering: list[str] = field(default_factory=list)
    below_min_isr: list[str] = field(default_factory=list)


class SimCluster:
    def __init__(
        self,
        nodes: list[SimNode],
        partitions: list[tuple[tuple[int, ...], int]],
        clock: VirtualClock,
    ) -> None:
        self.nodes = {n.node.name: n for n in nodes}
        self.by_id = {n.node.node_id: n for n in nodes}
        self.partitions = partitions  # (replicas, min_isr)
        self.clock = clock
        self.violations = Violations()

    # the platform --------------------------------------------------------------------------
    async def nodes_list(self) -> list[Node]:
        return [n.node for n in self.nodes.values()]

    def running(self, node_id: int) -> bool:
        return self.by_id[node_id].state(self.clock.now) is BrokerState.RUNNING

    def isr(self, replicas: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(r for r in replicas if self.running(r))

    def restart_now(self, name: str) -> None:
        sim = self.nodes[name]
        now = self.clock.now
        if sim.state(now) is BrokerState.RECOVERY:
            self.violations.restarted_recovering.append(f"{name}@{now:.0f}")
        for replicas, min_isr in self.partitions:
            isr = self.isr(replicas)
            if (
                sim.node.node_id in isr
                and len(replicas) > min_isr
                and len(isr) >= min_isr
                and len(isr) - 1 < min_isr
            ):
                self.violations.below_min_isr.append(f"{name}@{now:.0f} {replicas}")
        sim.restarts += 1
        sim.down_until = now + sim.restart_seconds
        sim.recovery_until = sim.down_until + sim.recovery_after_restart
        sim.recovery_segments = int(sim.recovery_after_restart * 10)
        sim.stall_at = None

    def cluster_view(self) -> ClusterView:
        parts = tuple(
            PartitionInfo("t", i, replicas, self.isr(replicas), min_isr)
            for i, (replicas, min_isr) in enumerate(self.partitions)
        )
        voters = [n for n in self.nodes.values() if n.node.is_controller]
        running = [v for v in voters if self.running(v.node.node_id)]
        leader = running[0].node.node_id if running else None
        quorum = None
        if leader is not None:
            now_ms = int(self.clock.now * 1000)
            quorum = QuorumInfo(
                leader,
                tuple(
                    VoterInfo(v.node.node_id, now_ms if self.running(v.node.node_id) else None)
                    for v in voters
                ),
            )
        return ClusterView(parts, quorum, leader)

    # the agents, over httpx ------------------------------------------------------------------
    def handle(self, request: httpx.Request) -> httpx.Response:
        name = request.url.host
        sim = self.nodes[name]
        state = sim.state(self.clock.now)
        if self.clock.now < sim.down_until - sim.restart_seconds + 1:
            return httpx.Response(503, json={"error": "jmx-unreachable", "message": "down"})
        body: dict[str, object] = {"brokerState": int(state)}
        if state is BrokerState.RECOVERY:
            logs, segments = sim.remaining(self.clock.now)
            body["recovery"] = {
                "remainingLogsToRecover": logs,
                "remainingSegmentsToRecover": segments,
            }
        return httpx.Response(200, content=json.dumps(body).encode())


class SimPlatform:
    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster

    async def nodes(self) -> list[Node]:
        return await self.cluster.nodes_list()

    async def observe(self, node: Node) -> PlatformView:
        sim = self.cluster.nodes[node.name]
        ready = sim.state(self.cluster.clock.now) is BrokerState.RUNNING
        return PlatformView(
            exists=True, ready=ready, up_to_date=sim.restarts > 0, instance=str(sim.restarts)
        )

    async def restart(self, node: Node) -> None:
        self.cluster.restart_now(node.name)

    async def close(self) -> None:
        pass


def random_cluster(
    rng: random.Random,
    clock: VirtualClock,
    size: int,
    *,
    recovering_at_start: float = 0.2,
    recovery_on_restart: float = 0.2,
    max_recovery: float = 3600,
) -> SimCluster:
    nodes = []
    controllers = set(rng.sample(range(size), k=min(3, size)))
    for i in range(size):
        roles = {Role.BROKER} | ({Role.CONTROLLER} if i in controllers else set())
        sim = SimNode(
            Node(i, f"kafka-{i}", frozenset(roles), f"https://kafka-{i}:8443"),
            restart_seconds=rng.uniform(20, 120),
        )
        if rng.random() < recovering_at_start:
            sim.down_until = 0.0
            sim.recovery_until = rng.uniform(60, max_recovery)
            sim.recovery_segments = int(sim.recovery_until * 10)
        if rng.random() < recovery_on_restart:
            sim.recovery_after_restart = rng.uniform(60, max_recovery)
        nodes.append(sim)
    partitions = []
    for _ in range(size * 4):
        replication = min(size, rng.choice([1, 2, 3, 3, 3]))
        replicas = tuple(rng.sample(range(size), k=replication))
        partitions.append((replicas, rng.choice([1, 2, 2])))
    return SimCluster(nodes, partitions, clock)


def make_roller(
    cluster: SimCluster,
    folder,
    settings: RollSettings | None = None,
    policy: RetryPolicy | None = None,
) -> Roller:
    clock = cluster.clock
    policy = policy or RetryPolicy(max_retries=30, initial_backoff_ms=5000, max_backoff_ms=60000)
    agents = AgentClient(
        ssl.create_default_context(),
        RetryPolicy(max_retries=2),
        transport=httpx.MockTransport(cluster.handle),
        sleep=clock.sleep,
    )

    async def observe() -> ClusterView:
        return cluster.cluster_view()

    return Roller(
        SimPlatform(cluster),
        observe,
        agents,
        FileJournalStore(folder),
        EventLog(folder / "events.jsonl", "sim"),
        settings=settings
        or RollSettings(
            operation_timeout=300, poll_interval=10, max_recovery_wait=6 * 3600, stall_timeout=600
        ),
        policy=policy,
        clock=clock,
        sleep=clock.sleep,
    )


def run_roll(cluster: SimCluster, folder, **kwargs) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    roller = make_roller(cluster, folder, **kwargs)

    async def go() -> tuple[str, str]:
        try:
            await roller.roll("sim")
        except RollFailed as exc:
            return "failed", str(exc)
        finally:
            await roller.agents.aclose()
        return "completed", ""

    return asyncio.run(go())
